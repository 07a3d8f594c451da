// The smallest rlx program (DESIGN.md section 5): y = x @ w, prints "4 6".
#include <rlx/rlx.h>

#include <iostream>

int main() {
  rlx::Graph g("hello");
  auto x = g.input("x", rlx::Shape({1, 4}, rlx::DType::F32));
  auto w = g.param("w", rlx::Shape({4, 2}, rlx::DType::F32));
  auto y = g.matmul(x, w);  // output type inferred
  g.set_outputs({y});

  rlx::CompiledGraph net = rlx::Session(rlx::Device::Cpu).compile(g);
  net.set_param("w", std::vector<float>{1, 0, 0, 1, 1, 0, 0, 1});
  std::vector<std::vector<float>> out = net.run({{"x", std::vector<float>{1, 2, 3, 4}}});
  std::cout << out[0][0] << " " << out[0][1] << "\n";  // out[0] == {4, 6}
  return 0;
}
