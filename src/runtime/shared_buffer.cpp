// SharedBuffer: a reference to one backend's Storage (backends/backend.h), with every range
// checked here before the storage is touched.
#include "backends/backend.h"
#include "rlx/compiled_graph.h"
#include "runtime/byte_spans.h"

namespace rlx {

namespace {
const backend::Storage& need(const std::shared_ptr<backend::Storage>& s, const char* what) {
  if (!s) fail(ErrorCategory::InvalidArgument, what, ": the buffer is empty (default-constructed)");
  return *s;
}
void check_range(const char* what, const char* which, size_t offset, size_t n, size_t total) {
  if (offset > total || n > total - offset)
    fail(ErrorCategory::InvalidArgument, what, ": ", n, " bytes at byte ", offset, " are outside ", which, " (", total,
         " bytes)");  // (offset + n may not fit a size_t: not printed)
}
}  // namespace

SharedBuffer::SharedBuffer() = default;
SharedBuffer::~SharedBuffer() = default;
SharedBuffer::SharedBuffer(const SharedBuffer&) = default;
SharedBuffer& SharedBuffer::operator=(const SharedBuffer&) = default;
SharedBuffer::SharedBuffer(std::shared_ptr<backend::Storage> s) : s_(std::move(s)) {}

size_t SharedBuffer::bytes() const { return s_ ? s_->bytes() : 0; }

void SharedBuffer::write(size_t offset, const void* src, size_t n) {
  detail::guard("SharedBuffer::write", [&] {
    check_range("SharedBuffer::write", "the buffer", offset, n, need(s_, "SharedBuffer::write").bytes());
    if (n && !src) fail(ErrorCategory::InvalidArgument, "SharedBuffer::write: null source");
    if (n) s_->write(offset, src, n);
  });
}

void SharedBuffer::read(size_t offset, void* dst, size_t n) const {
  detail::guard("SharedBuffer::read", [&] {
    check_range("SharedBuffer::read", "the buffer", offset, n, need(s_, "SharedBuffer::read").bytes());
    if (n && !dst) fail(ErrorCategory::InvalidArgument, "SharedBuffer::read: null destination");
    if (n) s_->read(offset, dst, n);
  });
}

void SharedBuffer::copy_from(const SharedBuffer& from, const std::vector<Range>& ranges) {
  detail::guard("SharedBuffer::copy_from", [&] {
    const char* what = "SharedBuffer::copy_from";
    const size_t to_bytes = need(s_, what).bytes(), from_bytes = need(from.s_, what).bytes();
    const bool same = s_ == from.s_;
    // Every range inside both buffers, and no written range meeting another range of this
    // buffer (written, or read when the source is this buffer too).
    std::vector<runtime::ByteSpan> spans;
    for (const Range& r : ranges) {
      check_range(what, "the destination", r.offset, r.bytes, to_bytes);
      check_range(what, "the source", r.from_offset, r.bytes, from_bytes);
      if (!r.bytes) continue;
      spans.push_back({0, r.offset, r.offset + r.bytes, true});
      if (same) spans.push_back({0, r.from_offset, r.from_offset + r.bytes, false});
    }
    if (const runtime::ByteSpan* a = runtime::first_conflict(spans))
      fail(ErrorCategory::InvalidArgument, what, ": bytes [", a->begin, ", ", a->end,
           ") overlap another range of the same call, one of them written");
    std::vector<uint8_t> tmp;
    for (const Range& r : ranges) {
      if (!r.bytes || s_->copy_from(*from.s_, r.from_offset, r.offset, r.bytes)) continue;
      tmp.resize(r.bytes);  // another backend's memory: through the host
      from.s_->read(r.from_offset, tmp.data(), r.bytes);
      s_->write(r.offset, tmp.data(), r.bytes);
    }
  });
}

}  // namespace rlx
