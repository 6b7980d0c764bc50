// Loads every tests/fixtures/*.dsm written by the Python writer. When FILE.input.bin and
// FILE.output.bin (raw float32; FILE is the name without ".dsm") sit beside one, runs it and
// compares the first output within kTol max abs.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "deepslim/deepslim.h"
#include "harness.h"

namespace fs = std::filesystem;

namespace {

constexpr double kTol = 1e-4;

bool read_floats(const fs::path& p, std::vector<float>* out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() % 4) return false;
  out->resize(bytes.size() / 4);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(out->data()));
  return true;
}

std::vector<fs::path> fixtures() {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(DEEPSLIM_FIXTURE_DIR, ec))
    if (e.path().extension() == ".dsm") found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

// A fixture whose name says it is broken ("bad_*" or "*_invalid*") must be refused.
bool expected_invalid(const fs::path& p) {
  const std::string n = p.filename().string();
  return n.rfind("bad_", 0) == 0 || n.find("invalid") != std::string::npos;
}

}  // namespace

TEST(fixtures_load_and_run) {
  const std::vector<fs::path> files = fixtures();
  if (files.empty()) SKIP(std::string("no .dsm fixtures in ") + DEEPSLIM_FIXTURE_DIR);
  for (const fs::path& path : files) {
    ds_model* m = nullptr;
    const ds_status st = ds_model_load_file(path.string().c_str(), &m);
    const std::string err = ds_last_error();
    if (expected_invalid(path)) {
      CHECK_MSG(st != DS_OK && !err.empty(), path.string() + " should be refused");
      std::printf("  %s: refused as expected (%s: %s)\n", path.filename().c_str(), ds_status_name(st), err.c_str());
      ds_model_free(m);
      continue;
    }
    CHECK_MSG(st == DS_OK, path.string() + ": " + err);
    if (st != DS_OK) continue;
    const fs::path stem = path.parent_path() / path.stem();
    std::vector<float> x, want;
    if (!read_floats(stem.string() + ".input.bin", &x) || !read_floats(stem.string() + ".output.bin", &want)) {
      std::printf("  %s: loaded (no input/output sidecar)\n", path.filename().c_str());
      ds_model_free(m);
      continue;
    }
    const char* name;
    size_t rank;
    const int64_t* mdims;
    ds_model_input_info(m, 0, &name, &rank, &mdims);
    std::vector<int64_t> dims(mdims, mdims + rank);
    int64_t per_sample = 1;
    for (size_t i = 1; i < rank; ++i) per_sample *= dims[i];
    if (rank > 0 && dims[0] == -1) dims[0] = per_sample ? int64_t(x.size()) / per_sample : 1;
    ds_session* s = nullptr;
    ds_session_options o = DS_SESSION_OPTIONS_INIT;
    bool ok = ds_session_create(m, &o, &s) == DS_OK && ds_session_set_input(s, 0, x.data(), dims.data(), rank) == DS_OK &&
              ds_session_run(s) == DS_OK;
    CHECK_MSG(ok, path.string() + ": " + ds_last_error());
    if (ok) {
      std::vector<float> y(want.size());
      CHECK_MSG(ds_session_get_output(s, 0, y.data(), y.size()) == DS_OK, path.string() + ": " + ds_last_error());
      double max_abs = 0;
      for (size_t i = 0; i < y.size(); ++i) max_abs = std::max(max_abs, double(std::fabs(y[i] - want[i])));
      CHECK_MSG(max_abs <= kTol, path.string() + ": max abs difference " + std::to_string(max_abs));
      std::printf("  %s: ran, max abs difference %.3g\n", path.filename().c_str(), max_abs);
    }
    ds_session_free(s);
    ds_model_free(m);
  }
}
