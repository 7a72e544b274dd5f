// The remembered choices, one row each: the name it has in the settings file
// and in a saved view, where it lives in UiState, its range and what the
// loaded model narrows it to. Its default is UiState's own initialiser. The
// settings file's reader and writer, the saved views', fit_choices and the
// page's state all walk this table, so a new remembered choice is a member of
// UiState and one row here (docs/architecture.md shows one added).
// The choices with a shape of their own (the sampler, the KV layout, the
// camera preset, the decoding strategy) keep their one JSON form beside it
// (sampler_json.h, kv_layout_json.h, settings.cpp) and are fitted by fit_choices.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <variant>
#include <vector>

#include "app/session/state.h"

namespace kvscope {

// What the loaded model narrows a choice's range to.
enum class ModelLimit {
  kNone,
  kContext,  // 0..its context (n_positions)
  kLayer,    // -1 (the mean) ..its layers - 1
  kHead,     // -1 (the mean) ..its heads - 1
};

struct ChoiceRow {
  using Member = std::variant<int UiState::*, float UiState::*, bool UiState::*, std::string UiState::*>;
  const char* key;       // the settings file's name ("" = not kept there)
  const char* view_key;  // a saved view's name, "object.field" inside an object ("" = not in views; a
                         // view's row is a ViewChoices member: views are read through ViewChoices)
  const char* label;     // what fitting's notes call it
  Member member;
  double lo = 0, hi = 0;  // a number's range without a model (strings: at most ui_range::kTextMax bytes)
  ModelLimit model_limit = ModelLimit::kNone;
};

// Every row, in the settings file's order.
const std::vector<ChoiceRow>& choice_table();

// The rows' values into `j` (settings: `key`s; views: `view_key`s, nested).
void choices_to_json(const UiState& ui, nlohmann::json& j, bool view);
// The settings file's rows from `j`: a value of the wrong type, or a number
// its member cannot hold, keeps what `ui` has (fit_choices then fits ranges).
void choices_from_settings_json(const nlohmann::json& j, UiState& ui);
// A saved view's rows from `j`, strictly: throws kvscope::Error naming
// `origin`, the dotted field and what was expected for a value of the wrong
// type. Ranges are fit_choices', which the restore runs (one range per row).
void choices_from_view_json(const nlohmann::json& j, const std::string& origin, ViewChoices& v);

}  // namespace kvscope
