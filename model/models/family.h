// What every model family's file pair (model/models/gpt2.h, llama.h)
// provides, and the engine's types its layer works on (declared here,
// defined in model/engine/, so a family's header never includes the engine).
// A family F has:
//   - its weights struct, one alternative of FamilyWeights (model/arch/model.h),
//     with embedding(), head(), layer_matrices(), vector_bytes(),
//     resident_bytes() and lookup_bytes() (what Model and forward_read_bytes
//     ask of any family);
//   - Config parse_F_config(j, origin, ...): its config.json fields (parse_config);
//   - void load_F(dir, Model&, const LoadControl&): its tensors, checked, and
//     its tokenizer (load_model's switch on Config::arch);
//   - embed, run_layer and head_logits, overloaded on its weights: its part of
//     the forward pass (Engine::forward's one std::visit).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/arch/config.h"
#include "model/arch/load_control.h"
#include "model/arch/weight_matrix.h"

namespace kvscope {

struct BatchEntry;  // model/engine/engine.h
struct Model;       // model/arch/model.h
struct Workspace;   // model/engine/engine_detail.h
namespace detail {
struct LayerPass;  // model/engine/engine_detail.h: a layer's view of the batch, the cache and the attention
}  // namespace detail

}  // namespace kvscope
