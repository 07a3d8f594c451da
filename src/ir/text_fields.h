// Internal: generic access to attribute fields (through each struct's visit()) and
// the lexical pieces shared by the text printer (text_format.cpp) and parser
// (text_parse.cpp).
#pragma once
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rlx/attrs.h"

namespace rlx::ir::text {

using FieldRef = std::variant<int64_t*, double*, bool*, DType*, Activation*, PadMode*, std::vector<int64_t>*,
                              std::vector<double>*, std::string*, Blob*, std::vector<FusedOp>*>;
struct Field {
  std::string_view name;
  FieldRef ref;
};

// The fields of the struct held by `a`, in visit() order; pointers into `a`.
std::vector<Field> fields_of(Attrs& a);
// Same alternative and equal value; doubles compare equal when both are NaN.
bool field_equal(const FieldRef& a, const FieldRef& b);
bool double_equal(double a, double b);

// Shortest text that parses back to the same double ("inf", "-inf", "nan" included).
std::string format_double(double v);
// [A-Za-z_][A-Za-z0-9_]*
bool is_identifier(std::string_view s);
// A double-quoted literal with \" \\ \n \t \r and \xHH escapes.
std::string quote(std::string_view s);

}  // namespace rlx::ir::text
