// Fuzz target body for the text IR parser (rlx::parse_graph). See fuzz_common.h for the
// contract. Per input: parse; a graph that parses must print, parse back to an equal
// graph, print identically (the round trip the format promises), and pass the verifier
// (the parser re-infers every node's types); small graphs are compiled and run once, as
// `rlx check` / `rlx run` would do with a .rlx file.
#pragma once
#include <string>
#include <string_view>

#include "fuzz_common.h"

namespace rlx::fuzz {

inline constexpr size_t kTextMaxInput = 64 << 10;

inline bool text_one_input(const uint8_t* data, size_t size) {
  if (size > kTextMaxInput) return false;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  return guard([&] {
    Graph g = parse_graph(text, "fuzz.rlx");
    std::string printed = print_graph(g);
    Graph back;
    try {
      back = parse_graph(printed, "fuzz.rlx (printed)");
    } catch (const Error& e) {
      throw Finding(std::string("a parsed graph prints to text that does not parse: ") + e.what() + "\n" + printed);
    }
    if (!graphs_equal(g, back)) throw Finding("text round trip is not equal:\n" + printed);
    std::string printed_back = print_graph(back);
    if (printed_back != printed)
      throw Finding("text round trip prints differently:\n" + printed + "\n---\n" + printed_back);
    try {
      verify_graph(g);
    } catch (const Error& e) {
      throw Finding(std::string("a parsed graph fails the verifier: ") + e.what() + "\n" + printed);
    }
    ByteSource src(data, size);
    compile_and_run(g, src);
  });
}

}  // namespace rlx::fuzz
