// Corrupt or inconsistent model folders: every one must raise kvscope::Error
// (never another exception type, a crash or an out-of-bounds read under ASan)
// whose message names the file and the problem. The corrupt files are made
// here from a valid checkpoint written by tools/numpy_ref.py.

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "model/arch/config.h"
#include "model/arch/model.h"
#include "model/arch/safetensors.h"
#include "model/core/error.h"
#include "model/core/file_io.h"
#include "model/decoding/generator.h"
#include "model/decoding/sampler.h"
#include "model/serving/server.h"
#include "model/tokenizer/tokenizer.h"
#include "numpy_ref_util.h"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using testutil::json;
using testutil::TempDir;

// 2 layers, d 32, ctx 64, F32, `transformer.` prefix, attn.bias buffers.
const char* const kBase = "l2h2d32_f32_prefix_buffers";

// Each inner list is a set of alternatives; the message must contain one of
// each (case-sensitive), so the checks do not depend on exact wording.
using Needles = std::vector<std::vector<std::string>>;

std::string describe(const Needles& n) {
  std::string s;
  for (const auto& alts : n) {
    s += "[";
    for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
    s += "] ";
  }
  return s;
}

template <class F>
void expect_error(F&& f, const Needles& needles, const std::string& what_case) {
  try {
    f();
    ADD_FAILURE() << what_case << ": no error thrown";
  } catch (const Error& e) {
    const std::string msg = e.what();
    std::cout << "  [" << what_case << "] " << msg << "\n";
    for (const auto& alts : needles) {
      bool found = false;
      for (const auto& a : alts) found = found || msg.find(a) != std::string::npos;
      EXPECT_TRUE(found) << what_case << ": message lacks " << describe({alts}) << "\n  message: " << msg;
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << what_case << ": threw a non-kvscope exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << what_case << ": threw something that is not a std::exception";
  }
}

// --- safetensors as header JSON + data, to edit --------------------------------

struct St {
  json header;
  std::string data;
};

St split_st(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);  // little-endian host (x86-64, aarch64)
  St st;
  st.header = json::parse(bytes.substr(8, n));
  st.data = bytes.substr(8 + n);
  return st;
}

std::string join_st(const std::string& header_text, const std::string& data) {
  const uint64_t n = header_text.size();
  std::string out(8, '\0');
  std::memcpy(&out[0], &n, 8);
  return out + header_text + data;
}

std::string join_st(const St& st) {
  return join_st(st.header.dump(), st.data);
}

class BadInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = std::make_unique<TempDir>("bad-inputs");
    base_ = testutil::read_file(testutil::suite_checkpoint(kBase) + "/model.safetensors");
    st_ = split_st(base_);
    d_ = testutil::read_json(testutil::suite_checkpoint(kBase) + "/config.json").at("n_embd").get<int>();
  }
  // A copy of the valid checkpoint, with model.safetensors replaced by `bytes` when given.
  std::string folder(const std::string& name, const std::string* st_bytes = nullptr) {
    const std::string dir = *tmp_ / name;
    testutil::copy_checkpoint(kBase, dir);
    if (st_bytes) testutil::write_file(dir + "/model.safetensors", *st_bytes);
    return dir;
  }
  std::string folder_with(const std::string& name, const St& st) {
    const std::string b = join_st(st);
    return folder(name, &b);
  }
  void expect_load_error(const std::string& dir, Needles needles, const std::string& what_case) {
    expect_error([&] { load_model(dir); }, needles, what_case);
  }
  void expect_st_error(const std::string& bytes, Needles needles, const std::string& what_case) {
    needles.insert(needles.begin(), {"mem.safetensors"});
    expect_error([&] { SafeTensors::from_bytes(bytes, "mem.safetensors"); }, needles, what_case);
  }

  std::unique_ptr<TempDir> tmp_;
  std::string base_;
  St st_;
  int d_ = 0;
};

TEST_F(BadInputs, ValidBaseLoads) {
  std::shared_ptr<const Model> m = load_model(folder("valid"));
  EXPECT_EQ(m->config.n_embd, d_);
  const SafeTensors st = SafeTensors::from_bytes(base_, "mem.safetensors");
  EXPECT_EQ(st.origin(), "mem.safetensors");
  EXPECT_TRUE(st.has("transformer.wte.weight"));
  EXPECT_EQ(st.tensors().at("transformer.h.0.ln_1.weight").shape, (std::vector<int64_t>{d_}));
  EXPECT_EQ(st.to_f32("transformer.h.0.ln_1.weight").size(), static_cast<size_t>(d_));
}

TEST_F(BadInputs, TruncatedSafetensors) {
  const std::string file_word = "model.safetensors";
  const std::string cut = base_.substr(0, base_.size() * 6 / 10);
  expect_load_error(folder("trunc", &cut),
                    {{file_word}, {"truncat", "beyond", "past", "end", "range", "exceed", "bound", "short"}},
                    "data truncated");
  expect_st_error(cut, {}, "data truncated (from_bytes)");
  const std::string cut1 = base_.substr(0, base_.size() - 1);
  expect_load_error(folder("trunc1", &cut1), {{file_word}}, "one byte short");
  const std::string tiny = base_.substr(0, 5);
  expect_load_error(folder("tiny", &tiny), {{file_word}}, "5-byte file");
  const std::string empty;
  expect_load_error(folder("empty", &empty), {{file_word}}, "empty file");
  expect_st_error(empty, {}, "empty (from_bytes)");
}

TEST_F(BadInputs, HeaderLengthBeyondFile) {
  uint64_t hlen = 0;
  std::memcpy(&hlen, base_.data(), 8);
  const std::string mid = base_.substr(0, 8 + hlen / 2);
  expect_load_error(folder("hdr-cut", &mid), {{"model.safetensors"}, {"header"}}, "file ends inside the header");
  for (uint64_t n : {static_cast<uint64_t>(base_.size()), static_cast<uint64_t>(1) << 40, ~static_cast<uint64_t>(0)}) {
    std::string b = base_;
    std::memcpy(&b[0], &n, 8);
    expect_st_error(b, {{"header"}}, "header length " + std::to_string(n));
  }
  std::string zero = base_;
  const uint64_t z = 0;
  std::memcpy(&zero[0], &z, 8);
  expect_st_error(zero, {{"header"}}, "header length 0");
}

TEST_F(BadInputs, HeaderNotJson) {
  expect_st_error(join_st("{\"a\": [1, 2", st_.data), {{"header", "JSON", "json"}}, "header is cut JSON");
  expect_st_error(join_st("[1, 2, 3]", st_.data), {{"header", "object"}}, "header is not an object");
  St no_offsets = st_;
  no_offsets.header["transformer.h.0.ln_1.bias"].erase("data_offsets");
  expect_st_error(join_st(no_offsets), {{"transformer.h.0.ln_1.bias"}, {"data_offsets"}}, "entry without data_offsets");
  St bad_shape = st_;
  bad_shape.header["transformer.h.0.ln_1.bias"]["shape"] = "32";
  expect_st_error(join_st(bad_shape), {{"transformer.h.0.ln_1.bias"}, {"shape"}}, "shape not a list");
  St neg_shape = st_;
  neg_shape.header["transformer.h.0.ln_1.bias"]["shape"] = json::array({-32});
  expect_st_error(join_st(neg_shape), {{"transformer.h.0.ln_1.bias"}}, "negative dimension");
}

TEST_F(BadInputs, OffsetsOutOfRange) {
  const std::string name = "transformer.h.1.mlp.c_proj.weight";
  St st = st_;
  const uint64_t size = 4ull * 4 * d_ * d_;
  st.header[name]["data_offsets"] = json::array({st.data.size() - 8, st.data.size() - 8 + size});
  expect_load_error(folder_with("oob", st), {{"model.safetensors"}, {name}}, "end beyond the data");
  expect_st_error(join_st(st), {{name}}, "end beyond the data (from_bytes)");

  St huge = st_;
  huge.header[name]["data_offsets"] = json::array({~0ull - 4, ~0ull});
  expect_st_error(join_st(huge), {{name}}, "offsets near 2^64 (overflow)");

  St reversed = st_;
  auto offs = reversed.header[name]["data_offsets"];
  reversed.header[name]["data_offsets"] = json::array({offs[1], offs[0]});
  expect_st_error(join_st(reversed), {{name}}, "begin after end");
}

TEST_F(BadInputs, OverlappingOffsets) {
  const std::string a = "transformer.h.0.ln_1.weight", b = "transformer.h.0.ln_1.bias";  // both (d) f32
  St st = st_;
  const uint64_t begin = st.header[a]["data_offsets"][0];
  st.header[b]["data_offsets"] = json::array({begin + 4, begin + 4 + 4ull * d_});
  expect_load_error(folder_with("overlap", st), {{"model.safetensors"}, {"overlap"}, {a, b}}, "shifted overlap");
  St alias = st_;
  alias.header[b]["data_offsets"] = alias.header[a]["data_offsets"];
  expect_st_error(join_st(alias), {{"overlap"}, {a, b}}, "two tensors on the same bytes");
}

TEST_F(BadInputs, SizeDisagreesWithShape) {
  const std::string name = "transformer.h.0.attn.c_proj.bias";
  St st = st_;
  st.header[name]["shape"] = json::array({d_ + 1});
  expect_st_error(join_st(st), {{name}}, "shape larger than the byte range");
  St st2 = st_;
  st2.header[name]["shape"] = json::array({d_ / 2});
  expect_st_error(join_st(st2), {{name}}, "shape smaller than the byte range");
}

TEST_F(BadInputs, UnknownDtype) {
  const std::string name = "transformer.h.0.attn.c_proj.bias";
  St st = st_;
  st.header[name]["dtype"] = "F7";
  expect_load_error(folder_with("dtype", st), {{"model.safetensors"}, {name}, {"F7"}}, "unknown dtype");
  expect_st_error(join_st(st), {{name}, {"F7"}}, "unknown dtype (from_bytes)");
  // A real safetensors dtype the engine cannot use for a weight (same byte size).
  St i32 = st_;
  i32.header[name]["dtype"] = "I32";
  expect_load_error(folder_with("dtype-i32", i32), {{"model.safetensors"}, {name}, {"I32"}}, "integer weight");
}

TEST_F(BadInputs, ShapeMismatch) {
  const std::string name = "transformer.h.0.mlp.c_fc.weight";  // Conv1D (d, 4d)
  St st = st_;
  st.header[name]["shape"] = json::array({4 * d_, d_});  // transposed: same bytes, wrong layout
  expect_load_error(folder_with("shape", st),
                    {{"model.safetensors"}, {name, "h.0.mlp.c_fc.weight"}, {"expected"}, {std::to_string(4 * d_)}},
                    "transposed c_fc");
  // Config and weights disagree: n_positions larger than wpe.
  const std::string dir = folder("ctx");
  json cfg = testutil::read_json(dir + "/config.json");
  cfg["n_positions"] = cfg["n_positions"].get<int>() * 2;
  testutil::write_file(dir + "/config.json", cfg.dump());
  expect_load_error(dir, {{"wpe"}, {"expected"}}, "wpe rows vs n_positions");
  // vocab_size larger than wte.
  const std::string dir2 = folder("vocab-size");
  json cfg2 = testutil::read_json(dir2 + "/config.json");
  cfg2["vocab_size"] = cfg2["vocab_size"].get<int>() + 3;
  testutil::write_file(dir2 + "/config.json", cfg2.dump());
  expect_load_error(dir2, {{"wte"}, {"expected"}}, "wte rows vs vocab_size");
}

TEST_F(BadInputs, MissingTensor) {
  for (const std::string name : {"transformer.h.1.ln_2.bias", "transformer.wte.weight", "transformer.ln_f.weight",
                                 "transformer.h.0.attn.c_attn.weight"}) {
    St st = st_;
    st.header.erase(name);
    const std::string bare = name.substr(std::strlen("transformer."));
    expect_load_error(folder_with("missing", st),
                      {{"model.safetensors"}, {bare}, {"missing", "not found", "absent", "no tensor"}},
                      "missing " + name);
  }
}

TEST_F(BadInputs, MalformedConfig) {
  struct Case {
    std::string label, text;
    Needles needles;
  };
  json good = testutil::read_json(testutil::suite_checkpoint(kBase) + "/config.json");
  auto with = [&](const char* key, json value) {
    json c = good;
    c[key] = value;
    return c.dump();
  };
  auto without = [&](const char* key) {
    json c = good;
    c.erase(key);
    return c.dump();
  };
  const std::vector<Case> cases = {
      {"not JSON", "{ \"n_layer\": 2, ", {{"config.json"}}},
      {"not an object", "[2, 4]", {{"config.json"}}},
      {"empty", "", {{"config.json"}}},
      {"missing n_head", without("n_head"), {{"config.json"}, {"n_head"}}},
      {"missing n_embd", without("n_embd"), {{"config.json"}, {"n_embd"}}},
      {"missing n_layer", without("n_layer"), {{"config.json"}, {"n_layer"}}},
      {"missing vocab_size", without("vocab_size"), {{"config.json"}, {"vocab_size"}}},
      {"n_head a string", with("n_head", "two"), {{"config.json"}, {"n_head"}}},
      {"n_layer zero", with("n_layer", 0), {{"config.json"}, {"n_layer"}}},
      {"n_positions negative", with("n_positions", -5), {{"config.json"}, {"n_positions"}}},
      {"n_embd not divisible by n_head", with("n_head", 3), {{"config.json"}, {"n_head", "n_embd"}}},
      {"n_embd fractional", with("n_embd", 32.5), {{"config.json"}, {"n_embd"}}},
      {"activation relu", with("activation_function", "relu"), {{"config.json"}, {"activation_function"}}},
      {"epsilon a string", with("layer_norm_epsilon", "small"), {{"config.json"}, {"layer_norm_epsilon"}}},
  };
  for (const Case& c : cases) {
    const std::string dir = folder("config");
    testutil::write_file(dir + "/config.json", c.text);
    expect_load_error(dir, c.needles, "config: " + c.label);
    expect_error([&] { parse_config(c.text, "origin/config.json"); }, c.needles, "parse_config: " + c.label);
  }
  // Valid JSON text parses with the same values as the file.
  const Config cfg = parse_config(good.dump(), "x/config.json");
  EXPECT_EQ(cfg.n_embd, d_);
  EXPECT_EQ(cfg.head_dim() * cfg.n_head, cfg.n_embd);
}

TEST_F(BadInputs, MissingFiles) {
  for (const char* f : {"vocab.json", "merges.txt", "config.json", "model.safetensors"}) {
    const std::string dir = folder(std::string("no-") + f);
    fs::remove(dir + "/" + f);
    expect_load_error(dir, {{f}}, std::string("missing ") + f);
  }
  expect_load_error(*tmp_ / "does-not-exist", {{"does-not-exist"}}, "missing folder");
  const std::string dir = folder("vocab-bad");
  testutil::write_file(dir + "/vocab.json", "{\"a\": 0, \"b\": ");
  expect_load_error(dir, {{"vocab.json"}}, "vocab.json not JSON");
  const std::string dir2 = folder("vocab-types");
  testutil::write_file(dir2 + "/vocab.json", "{\"a\": \"zero\"}");
  expect_load_error(dir2, {{"vocab.json"}}, "vocab.json id not a number");
  expect_error([&] { Tokenizer::load(*tmp_ / "nowhere"); }, {{"vocab.json"}}, "Tokenizer::load without files");
  // A valid vocabulary plus one entry with a huge id: refused before the
  // dense id table is sized by it.
  const std::string dir3 = folder("vocab-sparse");
  nlohmann::json vocab = nlohmann::json::parse(testutil::read_file(dir3 + "/vocab.json"));
  vocab["zzz_sparse"] = 5000000;
  testutil::write_file(dir3 + "/vocab.json", vocab.dump());
  expect_load_error(dir3, {{"vocab.json"}, {"largest id is 5000000"}, {"without large gaps"}}, "vocab.json sparse ids");
}

// --- files that are not regular files ------------------------------------------

// Runs `f` on a thread and waits at most 20 s: a loader blocked in open() on a
// FIFO is a failure, and the FIFO is then opened for writing to free it.
template <class F>
void expect_error_promptly(F&& f, const Needles& needles, const std::string& what_case, const std::string& fifo = "") {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> fut = done->get_future();
  std::thread([f, done, needles, what_case] {
    expect_error(f, needles, what_case);
    done->set_value();
  }).detach();
  if (fut.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << what_case << ": still blocked after 20 s";
    if (!fifo.empty()) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    fut.wait();
  }
}

TEST_F(BadInputs, NotRegularFiles) {
  for (const char* f : {"model.safetensors", "config.json", "vocab.json", "merges.txt"}) {
    const std::string dir = folder(std::string("dir-") + f);
    fs::remove(dir + "/" + f);
    fs::create_directory(dir + "/" + f);
    expect_load_error(dir, {{std::string(f)}, {"is a directory"}, {"regular file"}}, std::string("directory ") + f);

    const std::string dir2 = folder(std::string("fifo-") + f);
    const std::string fifo = dir2 + "/" + f;
    fs::remove(fifo);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    expect_error_promptly([dir2] { load_model(dir2); }, {{std::string(f)}, {"FIFO"}, {"regular file"}},
                          std::string("FIFO ") + f, fifo);
  }
  const std::string dir3 = folder("device");
  fs::remove(dir3 + "/model.safetensors");
  fs::create_symlink("/dev/zero", dir3 + "/model.safetensors");
  expect_load_error(dir3, {{"model.safetensors"}, {"character device"}}, "symlink to /dev/zero");
  // The same function reads every file: the shared entry point says so directly.
  expect_error([&] { read_regular_file(tmp_->path(), "a test file"); }, {{"is a directory"}, {"a test file"}},
               "read_regular_file on a folder");
  // A read stops between chunks once cancelled (closing the window mid-load).
  const std::atomic<bool> cancelled{true};
  expect_error([&] { read_regular_file(folder("cancel") + "/model.safetensors", "weights", &cancelled); },
               {{"model.safetensors"}, {"cancelled"}}, "cancelled read");
  std::string out = "untouched";
  EXPECT_FALSE(read_regular_file_if_exists(*tmp_ / "absent.json", "settings", out));
  EXPECT_EQ(out, "untouched");
}

// Tensors are read from the file one at a time after its header: a range reads
// exactly its bytes, and a file cut short meanwhile is named with the tensor.
TEST_F(BadInputs, TensorReadsFromAFileCutShort) {
  const std::string path = folder("cut") + "/model.safetensors";
  const std::string whole = read_regular_file(path, "weights");
  std::string mid(100, '\0');
  ReadOnlyFile::open(path, "weights").read(1000, mid.size(), mid.data());
  EXPECT_EQ(mid, whole.substr(1000, 100));
  const SafeTensors st = SafeTensors::open_header(path, nullptr, 0);  // tensors read from the file
  const auto last = std::max_element(st.tensors().begin(), st.tensors().end(),
                                     [](const auto& a, const auto& b) { return a.second.end < b.second.end; });
  std::vector<char> buf(last->second.end - last->second.begin);
  st.read_raw(last->first, buf.data());  // whole: fine
  std::vector<char> from_whole(buf.size());
  SafeTensors::open_header(path).read_raw(last->first, from_whole.data());  // a small file: read whole at once
  EXPECT_EQ(from_whole, buf);
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(whole.size() / 2)), 0);
  expect_error([&] { st.read_raw(last->first, buf.data()); },
               {{path}, {"ended early"}, {"tensor \"" + last->first + "\""}}, "a file cut short after its header");
}

// --- non-finite weights and logits -----------------------------------------------

TEST_F(BadInputs, NonFiniteWeights) {
  const std::string name = "transformer.h.1.mlp.c_fc.weight";  // Conv1D (d, 4d), F32
  const uint64_t begin = st_.header[name]["data_offsets"][0];
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    St st = st_;
    const size_t index = 4 * static_cast<size_t>(d_) + 5;  // row 1, column 5
    std::memcpy(&st.data[begin + 4 * index], &bad, 4);
    expect_load_error(folder_with("nonfinite", st),
                      {{"model.safetensors"},
                       {"h.1.mlp.c_fc.weight"},
                       {std::isnan(bad) ? "NaN" : "inf"},
                       {"element " + std::to_string(index)},
                       {"row 1, column 5"}},
                      "non-finite weight");
  }
}

TEST_F(BadInputs, NonFiniteLogitsStopTheGeneration) {
  // Finite weights whose product overflows: a huge final layer-norm bias
  // makes every logit +-inf or NaN. The step must fail with a clear error,
  // never return a record with NaN probabilities.
  St st = st_;
  const std::string name = "transformer.ln_f.bias";
  const uint64_t begin = st.header[name]["data_offsets"][0];
  for (int i = 0; i < d_; ++i) {
    const float big = (i % 2 ? -3e38f : 3e38f);
    std::memcpy(&st.data[begin + 4 * static_cast<size_t>(i)], &big, 4);
  }
  std::shared_ptr<const Model> m = load_model(folder_with("overflow", st));
  Generator gen(m);
  GenerateOptions opt;
  opt.max_new = 2;
  gen.start("ab", opt);
  expect_error([&] { gen.step(); }, {{"non-finite logit"}, {"stopped"}}, "overflowing logits");

  Sampler sampler;
  std::vector<float> logits = {0.5f, std::nanf(""), 1.0f};
  expect_error([&] { sampler.sample(logits, {}); }, {{"NaN"}, {"token id 1"}}, "NaN logit in the sampler");
}

// --- writes that fail --------------------------------------------------------------

// Files in `dir` whose name contains ".tmp" (what a failed write could leave behind).
std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path().string());
  return out;
}

TEST_F(BadInputs, SafeWriteReplacesOrKeepsTheOldFile) {
  const std::string dir = *tmp_ / "writes";
  fs::create_directory(dir);
  const std::string path = dir + "/settings.json";
  write_file_atomic(path, "old contents\n");
  EXPECT_EQ(testutil::read_file(path), "old contents\n");
  write_file_atomic(path, "new contents\n");
  EXPECT_EQ(testutil::read_file(path), "new contents\n");

  // A full disk, without root: a file-size limit makes write() fail with EFBIG
  // (SIGXFSZ ignored, as it would kill the process).
  const std::string big(1 << 16, 'x');
  struct rlimit old_limit {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  void (*old_handler)(int) = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  expect_error([&] { write_file_atomic(path, big); }, {{path}, {"File too large"}, {"unchanged"}},
               "write over a limit");
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(testutil::read_file(path), "new contents\n") << "the old file must survive a failed write";
  EXPECT_TRUE(temp_files(dir).empty()) << "a failed write left " << temp_files(dir).front();

  // A missing folder is an error, and is not created.
  const std::string missing = dir + "/no/such/folder/out.png";
  expect_error([&] { write_file_atomic(missing, "x"); }, {{"out.png"}, {"does not exist"}}, "missing folder");
  EXPECT_FALSE(fs::exists(dir + "/no"));
  // A folder where the file should be: the folder stays.
  fs::create_directory(dir + "/taken.png");
  expect_error([&] { write_file_atomic(dir + "/taken.png", "x"); }, {{"taken.png"}}, "destination is a folder");
  EXPECT_TRUE(fs::is_directory(dir + "/taken.png"));
  EXPECT_TRUE(temp_files(dir).empty());
}

// A FIFO or device node where the file should go is refused, not renamed
// over; a symbolic link to a file is written through and stays a link.
TEST_F(BadInputs, SafeWriteRefusesSpecialFilesAndFollowsLinks) {
  const std::string dir = *tmp_ / "special";
  fs::create_directory(dir);
  const std::string fifo = dir + "/fifo.png";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { write_file_atomic(fifo, "x"); }, {{fifo}, {"FIFO"}, {"not a regular file"}}, "FIFO target");
  EXPECT_TRUE(fs::is_fifo(fifo));
  const std::string to_fifo = dir + "/to-fifo.png";
  fs::create_symlink("fifo.png", to_fifo);
  expect_error([&] { write_file_atomic(to_fifo, "x"); }, {{to_fifo}, {"FIFO"}}, "link to a FIFO");
  EXPECT_TRUE(fs::is_symlink(to_fifo));
  EXPECT_TRUE(fs::is_fifo(fifo));

  const std::string real = dir + "/real.json", link = dir + "/link.json";
  testutil::write_file(real, "old\n");
  fs::create_symlink("real.json", link);
  write_file_atomic(link, "new\n");
  EXPECT_TRUE(fs::is_symlink(link)) << "the link was replaced by a file";
  EXPECT_EQ(testutil::read_file(real), "new\n");
  EXPECT_TRUE(temp_files(dir).empty());
}

// Record accessors check their indices where checks are compiled in (Debug
// builds, or KVSCOPE_INDEX_CHECKS): an index restored from a file and never validated
// aborts with the values instead of reading outside the buffer.
TEST(RecordIndexChecks, AttentionOutsideTheRecordAborts) {
  StepRecord r;
  r.n_layer = 2;
  r.n_head = 2;
  r.n_rows = 1;
  r.seq_len = 3;
  r.attn.assign(2 * 2 * 1 * 3, 0.25f);
  EXPECT_EQ(r.attention(1, 1, 0, 2), 0.25f);
#if !defined(NDEBUG) || defined(KVSCOPE_INDEX_CHECKS)
  EXPECT_DEATH((void)r.attention(4095, 0, 0, 0), "attention layer = 4095, expected 0..1");
  EXPECT_DEATH((void)r.attention(0, 0, 0, -1), "attention key = -1");
#endif
}

// The query and K/V row accessors: a grouped-query record (4 query heads
// reading 2 K/V heads of width 3) is read at the right offsets, and an index
// outside it aborts where checks are compiled in.
TEST(RecordIndexChecks, QueryAndKvRowsOfAGroupedQueryRecord) {
  StepRecord r;
  r.n_layer = 2;
  r.n_head = 4;
  r.n_kv_head = 2;
  r.head_dim = 3;
  r.n_rows = 1;
  r.n_kv = 2;
  for (int i = 0; i < 2 * 1 * 4 * 3; ++i) r.q.push_back(static_cast<float>(i));
  for (int i = 0; i < 2 * 2 * 2 * 3; ++i) r.k.push_back(static_cast<float>(i));
  r.v = r.k;
  EXPECT_EQ(r.kv_head_of(3), 1);
  EXPECT_EQ(r.q_row(1, 0, 2)[0], 12.0f + 6.0f);  // layer 1 starts at 12, head 2 at 6
  EXPECT_EQ(r.k_row(1, 1, 1)[2], 12.0f + 6.0f + 3.0f + 2.0f);
  EXPECT_EQ(r.v_row(0, 0, 1)[0], 3.0f);
#if !defined(NDEBUG) || defined(KVSCOPE_INDEX_CHECKS)
  EXPECT_DEATH((void)r.q_row(0, 1, 0), "query row = 1, expected 0..0");
  EXPECT_DEATH((void)r.k_row(0, 0, 2), "K = 2, expected 0..1");
  EXPECT_DEATH((void)r.kv_head_of(4), "query head = 4");
  r.v.resize(5);  // a V buffer shorter than its shape says
  EXPECT_DEATH((void)r.v_row(1, 1, 1), "V = ");
#endif
}

// A serving step's entry keeps its last position's attention over its own
// keys [0, first + n), every layer and head: read at the right offset, and
// an index outside it aborts where checks are compiled in, as StepRecord's.
TEST(RecordIndexChecks, ServeEntryAttentionOutsideTheEntryAborts) {
  ServeEntry e;
  e.first = 2;
  e.n = 1;  // keys 0..2
  const int n_head = 2;
  for (int i = 0; i < 2 * n_head * 3; ++i) e.attn.push_back(static_cast<float>(i));  // 2 layers
  EXPECT_EQ(e.attention(n_head, 1, 1, 2), static_cast<float>((1 * n_head + 1) * 3 + 2));
#if !defined(NDEBUG) || defined(KVSCOPE_INDEX_CHECKS)
  EXPECT_DEATH((void)e.attention(n_head, 2, 0, 0), "attention layer = 2, expected 0..1");
  EXPECT_DEATH((void)e.attention(n_head, 0, 2, 0), "attention head = 2, expected 0..1");
  EXPECT_DEATH((void)e.attention(n_head, 0, 0, 3), "attention key = 3, expected 0..2");
  EXPECT_DEATH((void)e.attention(n_head, 0, 0, -1), "attention key = -1");
#endif
}

}  // namespace
}  // namespace kvscope
