// Byte ranges one call copies (a copy's destination, and its source where that lies in the
// same objects), checked before anything moves: copies with no written range meeting another
// range of the same object can run in any order. Used by CompiledGraph::copy_handle_ranges
// (objects: handles) and SharedBuffer::copy_from (one object: the buffer).
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

namespace rlx::runtime {

struct ByteSpan {
  int object = 0;
  size_t begin = 0, end = 0;
  bool written = false;
};

// The first span (by object, then start) that meets an earlier one of its object where one
// of the two is written; nullptr when there is none. Sorts `spans`.
inline const ByteSpan* first_conflict(std::vector<ByteSpan>& spans) {
  std::sort(spans.begin(), spans.end(), [](const ByteSpan& a, const ByteSpan& b) {
    return a.object != b.object ? a.object < b.object : a.begin < b.begin;
  });
  // Sorted by start, a span meets an earlier one exactly when it starts before that one's
  // end: so it conflicts when it starts before the furthest end of the earlier written
  // spans, or is written and starts before the furthest end of any earlier span.
  size_t end_any = 0, end_written = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const ByteSpan& a = spans[i];
    if (i == 0 || spans[i - 1].object != a.object) end_any = end_written = 0;
    if (a.begin < end_written || (a.written && a.begin < end_any)) return &a;
    end_any = std::max(end_any, a.end);
    if (a.written) end_written = std::max(end_written, a.end);
  }
  return nullptr;
}

}  // namespace rlx::runtime
