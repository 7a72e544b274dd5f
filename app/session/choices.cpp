#include "app/session/choices.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "app/session/fitting.h"
#include "app/session/text_scale.h"
#include "model/core/error.h"
#include "model/core/json_number.h"
#include "model/core/json_quote.h"

namespace kvscope {

using nlohmann::json;

const std::vector<ChoiceRow>& choice_table() {
  using namespace ui_range;
  using L = ModelLimit;
  static const std::vector<ChoiceRow> rows = {
      {"preset", "", "prompt preset", &UiState::preset, 0, kNumPresets},
      {"custom_prompt", "", "the custom prompt", &UiState::custom_prompt},
      {"speed", "", "speed", &UiState::speed, kSpeedMin, kSpeedMax},
      {"fastest", "", "fastest", &UiState::fastest},
      {"max_new", "max_new", "max new tokens", &UiState::max_new, 0, kMaxNewMax, L::kContext},
      {"layer", "attention.layer", "layer", &UiState::layer, -1, kHeadsMax - 1, L::kLayer},
      {"head", "attention.head", "head", &UiState::head, -1, kHeadsMax - 1, L::kHead},
      {"min_weight", "attention.min_weight", "minimum ray weight", &UiState::min_weight, 0, kMinWeightMax},
      {"rays", "", "rays", &UiState::rays},
      {"model_dir_input", "", "the model folder", &UiState::model_dir_input},
      {"labels", "", "labels", &UiState::labels},
      {"legend", "", "legend", &UiState::legend},
      {"hud", "", "hud", &UiState::hud},
      {"grid", "", "grid", &UiState::grid},
      {"text_scale", "text_scale", "text scale", &UiState::text_scale, kMinTextScale, kMaxTextScale},
      {"", "presentation", "presentation", &UiState::presentation},
      {"", "predict", "predict", &UiState::predict},
      {"colour_blind", "", "colour-blind palette", &UiState::colour_blind},
      {"kv_context", "", "KV calculator tokens", &UiState::kv_context, 1, kKvContextMax},
      {"kv_dtype", "", "KV calculator format", &UiState::kv_dtype, 0, kKvDtypes - 1},
      {"bottom_tab", "", "tab", &UiState::bottom_tab, 0, kBottomTabs - 1},
      {"view_path", "", "the saved view's path", &UiState::view_path},
      {"chat_system", "", "the chat's system prompt", &UiState::chat_system},
      {"chat_format", "", "the chat's template", &UiState::chat_format, 0, kChatFormats},
      {"chat_max_new", "", "the chat's reply length", &UiState::chat_max_new, 1, kMaxNewMax, L::kContext},
  };
  return rows;
}

namespace {

// "attention.layer" -> the object "attention" of `j` (made when `make`) and "layer".
const json* view_parent(const json& j, const std::string& key, std::string& field) {
  const size_t dot = key.find('.');
  if (dot == std::string::npos) {
    field = key;
    return &j;
  }
  field = key.substr(dot + 1);
  const auto it = j.find(key.substr(0, dot));
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

template <class T>
json value_json(const T& v) {
  return json(v);
}

// A saved view's value of one row, checked against the row's type and range.
struct ViewReader {
  const std::string& origin;
  const ChoiceRow& row;
  const json& v;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error(origin + ": field \"" + row.view_key + "\" " + what);
  }
  // Numbers are read as their member holds them; their range is fit_choices' (the restore names what it fits).
  void operator()(int UiState::*m, UiState& ui) const {
    int x = 0;
    if (!v.is_number_integer() || !number_as(v, x)) fail("must be an integer, got " + json_quote(v));
    ui.*m = x;
  }
  void operator()(float UiState::*m, UiState& ui) const {
    float x = 0;
    if (!v.is_number() || !number_as(v, x)) fail("must be a number, got " + json_quote(v));
    ui.*m = x;
  }
  void operator()(bool UiState::*m, UiState& ui) const {
    if (!v.is_boolean()) fail("must be true or false, got " + json_quote(v));
    ui.*m = v.get<bool>();
  }
  void operator()(std::string UiState::*m, UiState& ui) const {
    if (!v.is_string()) fail("must be a string, got " + json_quote(v));
    ui.*m = v.get<std::string>();
  }
};

}  // namespace

void choices_to_json(const UiState& ui, json& j, bool view) {
  for (const ChoiceRow& row : choice_table()) {
    const char* key = view ? row.view_key : row.key;
    if (!*key) continue;
    const json value = std::visit([&](auto m) { return value_json(ui.*m); }, row.member);
    const char* dot = std::strchr(key, '.');
    if (dot)
      j[std::string(key, dot)][dot + 1] = value;
    else
      j[key] = value;
  }
}

void choices_from_settings_json(const json& j, UiState& ui) {
  for (const ChoiceRow& row : choice_table()) {
    if (!*row.key) continue;
    const auto it = j.find(row.key);
    if (it == j.end()) continue;
    std::visit(
        [&](auto m) {
          using T = std::decay_t<decltype(ui.*m)>;
          if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
            number_as(*it, ui.*m);  // a number T cannot hold keeps the value, like a wrong type
          } else if constexpr (std::is_same_v<T, bool>) {
            if (it->is_boolean()) ui.*m = it->template get<bool>();
          } else {
            if (it->is_string()) ui.*m = it->template get<std::string>();
          }
        },
        row.member);
  }
}

void choices_from_view_json(const json& j, const std::string& origin, ViewChoices& v) {
  UiState ui;  // the view's rows are ViewChoices members: read through a UiState built on `v`
  ui.choices() = v;
  for (const ChoiceRow& row : choice_table()) {
    if (!*row.view_key) continue;
    std::string field;
    const json* parent = view_parent(j, row.view_key, field);
    if (!parent) continue;
    if (!parent->is_object())
      throw Error(origin + ": field \"" + std::string(row.view_key, std::strchr(row.view_key, '.')) +
                  "\" must be an object, got " + json_quote(*parent));
    const auto it = parent->find(field);
    if (it == parent->end() || it->is_null()) continue;
    const ViewReader read{origin, row, *it};
    std::visit([&](auto m) { read(m, ui); }, row.member);
  }
  v = ui.choices();
}

}  // namespace kvscope
