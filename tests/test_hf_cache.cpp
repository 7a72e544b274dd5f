// A model named by its Hugging Face id, found in a local Hugging Face cache laid
// out as huggingface_hub writes it (models--ORG--NAME/{blobs,refs/main,snapshots/<commit>/}
// with the snapshot's files symlinked into blobs/).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model/arch/hf_cache.h"
#include "model/arch/model.h"
#include "model/core/error.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::suite_checkpoint;
using testutil::TempDir;

// Sets an environment variable for one test, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Writes `src`'s files into <hub>/models--ORG--NAME as the hub client does:
// each file a blob, the snapshot's entry a relative symlink to it.
std::string make_hub_repo(const std::string& hub, const std::string& repo, const std::string& commit,
                          const std::string& src, bool write_ref) {
  const fs::path root = fs::path(hub) / repo;
  fs::create_directories(root / "blobs");
  fs::create_directories(root / "snapshots" / commit);
  int n = 0;
  for (const auto& e : fs::directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const std::string blob = commit + "-" + std::to_string(n++);  // the hub names blobs by content hash
    fs::copy_file(e.path(), root / "blobs" / blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, root / "snapshots" / commit / e.path().filename());
  }
  if (write_ref) {
    fs::create_directories(root / "refs");
    std::ofstream(root / "refs" / "main") << commit;
  }
  return (root / "snapshots" / commit).string();
}

TEST(HubCache, IdForm) {
  EXPECT_TRUE(looks_like_hub_id("HuggingFaceTB/SmolLM2-135M"));
  EXPECT_TRUE(looks_like_hub_id("gpt2/x"));
  EXPECT_FALSE(looks_like_hub_id("gpt2"));
  EXPECT_FALSE(looks_like_hub_id("/abs/path"));
  EXPECT_FALSE(looks_like_hub_id("a/b/c"));
  EXPECT_FALSE(looks_like_hub_id("./x"));
  EXPECT_FALSE(looks_like_hub_id("../x"));
  EXPECT_FALSE(looks_like_hub_id("~/x"));
  EXPECT_FALSE(looks_like_hub_id("org/"));
}

TEST(HubCache, EnvironmentOrder) {
  ScopedEnv home("HOME", "/h");
  ScopedEnv xdg("XDG_CACHE_HOME", "");
  ScopedEnv hf_home("HF_HOME", "");
  ScopedEnv hub("HF_HUB_CACHE", "");
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{"/h/.cache/huggingface/hub"});
  ScopedEnv xdg2("XDG_CACHE_HOME", "/x");
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{"/x/huggingface/hub"});
  ScopedEnv hf_home2("HF_HOME", "/hf");
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{"/hf/hub"});
  ScopedEnv hub2("HF_HUB_CACHE", "/cache");
  EXPECT_EQ(hub_cache_dirs(), std::vector<std::string>{"/cache"});
}

TEST(HubCache, LoadsByIdThroughRefsMain) {
  TempDir tmp("hub");
  const std::string src = suite_checkpoint("l2h2d32_f32_prefix_buffers");
  const std::string engine = make_hub_repo(tmp.path(), "models--kvtest--tiny", "0123abcd", src, true);
  // A stale second snapshot: refs/main decides.
  make_hub_repo(tmp.path(), "models--kvtest--tiny", "ffff0000", src, false);
  ScopedEnv hub("HF_HUB_CACHE", tmp.path());
  EXPECT_EQ(resolve_model_dir("kvtest/tiny"), engine);
  auto by_id = load_model("kvtest/tiny");
  auto by_dir = load_model(src);
  EXPECT_EQ(by_id->config.n_layer, by_dir->config.n_layer);
  EXPECT_EQ(by_id->n_params, by_dir->n_params);
  EXPECT_EQ(by_id->name, "tiny");
  EXPECT_EQ(by_id->tokenizer.encode("hello world"), by_dir->tokenizer.encode("hello world"));
}

TEST(HubCache, OneSnapshotWithoutRef) {
  TempDir tmp("hub");
  const std::string engine =
      make_hub_repo(tmp.path(), "models--org--m", "abc", suite_checkpoint("l2h2d32_f32_prefix_buffers"), false);
  ScopedEnv hub("HF_HUB_CACHE", tmp.path());
  EXPECT_EQ(resolve_model_dir("org/m"), engine);
}

TEST(HubCache, AFolderOnDiskWinsAndAMissingIdIsNamed) {
  TempDir tmp("hub");
  ScopedEnv hub("HF_HUB_CACHE", tmp.path());
  EXPECT_EQ(resolve_model_dir("no-slash-name"), "no-slash-name");
  try {
    resolve_model_dir("nobody/nothing");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("nobody/nothing"), std::string::npos) << msg;
    EXPECT_NE(msg.find(tmp.path() + "/models--nobody--nothing"), std::string::npos) << msg;
  }
}

std::string message_of(const std::string& id) {
  try {
    resolve_model_dir(id);
  } catch (const Error& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

// refs/main naming a snapshot that is not there: refused, naming both commits,
// rather than loading the other snapshot (another commit of the model).
TEST(HubCache, RefsMainNamingAMissingSnapshotIsRefused) {
  TempDir tmp("hub");
  make_hub_repo(tmp.path(), "models--org--m", "0123abcd", suite_checkpoint("l2h2d32_f32_prefix_buffers"), false);
  fs::create_directories(tmp / "models--org--m/refs");
  std::ofstream(tmp / "models--org--m/refs/main") << "deadbeef";
  ScopedEnv hub("HF_HUB_CACHE", tmp.path());
  const std::string msg = message_of("org/m");
  EXPECT_NE(msg.find("refs/main names commit deadbeef, but snapshots/deadbeef does not exist"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("snapshots there: 0123abcd"), std::string::npos) << msg;
  // A snapshot that is a link looping onto itself is named as such.
  fs::create_symlink("deadbeef", tmp / "models--org--m/snapshots/deadbeef");
  EXPECT_NE(message_of("org/m").find("snapshots/deadbeef is a symbolic link that loops"), std::string::npos)
      << message_of("org/m");
}

// A snapshot link whose blob is missing is an interrupted download.
TEST(HubCache, ADanglingBlobLinkIsAnIncompleteDownload) {
  TempDir tmp("hub");
  const std::string snap =
      make_hub_repo(tmp.path(), "models--org--m", "abc", suite_checkpoint("l2h2d32_f32_prefix_buffers"), true);
  const fs::path link = fs::path(snap) / "config.json";
  const fs::path blob = fs::read_symlink(link);
  fs::remove(link.parent_path() / blob);
  ScopedEnv hub("HF_HUB_CACHE", tmp.path());
  const std::string msg = message_of("org/m");
  EXPECT_NE(msg.find(link.string() + ": an incomplete download, a dangling link to " + blob.string()),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("huggingface-cli download org/m"), std::string::npos) << msg;
}

// "org/m/" (a shell's completion of a folder name) is the id org/m.
TEST(HubCache, ATrailingSlashIsTheSameId) {
  TempDir tmp("hub");
  const std::string engine =
      make_hub_repo(tmp.path(), "models--org--m", "abc", suite_checkpoint("l2h2d32_f32_prefix_buffers"), true);
  ScopedEnv hub("HF_HUB_CACHE", tmp.path());
  EXPECT_EQ(resolve_model_dir("org/m/"), engine);
}

}  // namespace
}  // namespace kvscope
