// std::visit with one lambda per alternative:
//   std::visit(overloaded{[](const A&) {...}, [](const B&) {...}}, v);
#pragma once

namespace kvscope {

template <class... Ts>
struct overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
overloaded(Ts...) -> overloaded<Ts...>;

}  // namespace kvscope
