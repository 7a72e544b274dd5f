// Reading config.json's fields, checked, for every family's parser
// (parse_gpt2_config, parse_llama_config): each throws kvscope::Error naming
// `origin` (the file) and the field on anything missing or out of range.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/arch/config.h"

namespace kvscope::config_json {

// An integer in [lo, hi]; absent or null: `fallback`, or an error when `required`.
int get_int(const nlohmann::json& j, const std::string& origin, const char* key, int lo, int hi, bool required,
            int fallback);
// A positive number that survives the conversion to float (1e-50 would become 0).
double get_positive(const nlohmann::json& j, const std::string& origin, const char* key, double fallback,
                    bool required = false);
// A string field (absent or null: `fallback`).
std::string get_string(const nlohmann::json& j, const std::string& origin, const char* key,
                       const std::string& fallback);
bool get_bool(const nlohmann::json& j, const std::string& origin, const char* key, bool fallback);
// eos_token_id: an integer or a list of them, each below c.vocab_size.
void parse_eos(const nlohmann::json& j, const std::string& origin, Config& c);

}  // namespace kvscope::config_json
