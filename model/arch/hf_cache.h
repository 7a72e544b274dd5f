// A model named by its Hugging Face id ("HuggingFaceTB/SmolLM2-135M") found in
// the local Hugging Face cache, so a model a user already has on disk opens by
// name. The cache layout (huggingface_hub's file_download.py):
//   <hub>/models--ORG--NAME/refs/main          the commit hash the name points at
//   <hub>/models--ORG--NAME/snapshots/<hash>/  the files, symlinks into ../../blobs
// where <hub> is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
#pragma once

#include <string>
#include <vector>

namespace kvscope {

// True for "ORG/NAME" (exactly one '/', neither part empty, not "." or "..",
// no leading '/' or '~'): the form of a Hugging Face model id.
bool looks_like_hub_id(const std::string& s);

// The hub cache folders searched, in order (the first that the environment names).
std::vector<std::string> hub_cache_dirs();

// `dir` itself when it exists on disk or is not a hub id; else the snapshot
// folder of that id in the local cache (refs/main's commit, else the only
// snapshot). Throws kvscope::Error naming the id, the folder searched and how
// to get the model when the cache does not hold it.
std::string resolve_model_dir(const std::string& dir);

}  // namespace kvscope
