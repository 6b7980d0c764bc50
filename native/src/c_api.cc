// The C API (include/deepslim/deepslim.h): argument checks, and the one place where C++
// exceptions become a status plus a thread-local message.
#include <cstdio>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"
#include "core/model.h"
#include "core/session.h"
#include "deepslim/deepslim.h"

struct ds_model {
  std::unique_ptr<ds::Model> model;
};

struct ds_session {
  std::unique_ptr<ds::Session> session;
};

namespace {

thread_local std::string g_last_error;

ds_status set_error(ds_status status, const char* message) {
  try {
    g_last_error = message;
  } catch (...) {
    g_last_error.clear();  // out of memory while reporting: an empty message is all we can give
  }
  return status;
}

// Runs fn, mapping every exception to a status; clears the message on success.
template <typename Fn>
ds_status guarded(Fn&& fn) {
  try {
    fn();
    g_last_error.clear();
    return DS_OK;
  } catch (const ds::Error& e) {
    return set_error(e.status(), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(DS_ERR_OOM, "out of memory");
  } catch (const std::exception& e) {
    return set_error(DS_ERR_INTERNAL, (std::string("internal error: ") + e.what()).c_str());
  } catch (...) {
    return set_error(DS_ERR_INTERNAL, "internal error: unknown exception");
  }
}

void require(bool ok, const char* what) {
  if (!ok) ds::fail(DS_ERR_INVALID_ARG, what);
}

}  // namespace

extern "C" {

DS_API const char* ds_last_error(void) { return g_last_error.c_str(); }

DS_API const char* ds_status_name(ds_status status) {
  switch (status) {
    case DS_OK: return "DS_OK";
    case DS_ERR_INVALID_ARG: return "DS_ERR_INVALID_ARG";
    case DS_ERR_IO: return "DS_ERR_IO";
    case DS_ERR_FORMAT: return "DS_ERR_FORMAT";
    case DS_ERR_VERSION: return "DS_ERR_VERSION";
    case DS_ERR_CHECKSUM: return "DS_ERR_CHECKSUM";
    case DS_ERR_UNSUPPORTED_OP: return "DS_ERR_UNSUPPORTED_OP";
    case DS_ERR_SHAPE: return "DS_ERR_SHAPE";
    case DS_ERR_OOM: return "DS_ERR_OOM";
    case DS_ERR_INTERNAL: return "DS_ERR_INTERNAL";
  }
  return "DS_ERR_UNKNOWN";
}

DS_API const char* ds_version(void) { return "0.1.0"; }
DS_API uint32_t ds_format_version(void) { return ds::kFormatVersion; }

DS_API ds_status ds_model_load_memory(const void* data, size_t size, ds_model** out_model) {
  return guarded([&] {
    require(out_model != nullptr, "out_model is NULL");
    *out_model = nullptr;
    require(data != nullptr || size == 0, "data is NULL");
    static const uint8_t empty = 0;
    const uint8_t* bytes = data ? static_cast<const uint8_t*>(data) : &empty;
    auto m = std::make_unique<ds_model>();
    m->model = ds::load_model(bytes, size);
    *out_model = m.release();
  });
}

DS_API ds_status ds_model_load_file(const char* path, ds_model** out_model) {
  return guarded([&] {
    require(out_model != nullptr, "out_model is NULL");
    *out_model = nullptr;
    require(path != nullptr, "path is NULL");
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) ds::fail(DS_ERR_IO, "cannot open '", path, "'");
    const std::streamoff size = f.tellg();
    if (size < 0) ds::fail(DS_ERR_IO, "cannot get the size of '", path, "'");
    std::vector<uint8_t> bytes(static_cast<size_t>(size));
    f.seekg(0);
    if (size > 0 && !f.read(reinterpret_cast<char*>(bytes.data()), size))
      ds::fail(DS_ERR_IO, "cannot read '", path, "'");
    try {
      auto m = std::make_unique<ds_model>();
      m->model = ds::load_model(bytes.data(), bytes.size());
      *out_model = m.release();
    } catch (const ds::Error& e) {
      ds::fail(e.status(), path, ": ", e.message());
    }
  });
}

DS_API void ds_model_free(ds_model* model) { delete model; }

DS_API ds_status ds_model_input_count(const ds_model* model, size_t* out_count) {
  return guarded([&] {
    require(model && out_count, "model or out_count is NULL");
    *out_count = model->model->inputs.size();
  });
}

DS_API ds_status ds_model_output_count(const ds_model* model, size_t* out_count) {
  return guarded([&] {
    require(model && out_count, "model or out_count is NULL");
    *out_count = model->model->outputs.size();
  });
}

static ds_status io_info(const ds_model* model, bool input, size_t index, const char** out_name,
                         size_t* out_rank, const int64_t** out_dims) {
  return guarded([&] {
    require(model != nullptr, "model is NULL");
    const ds::Model& m = *model->model;
    const auto& ids = input ? m.inputs : m.outputs;
    if (index >= ids.size())
      ds::fail(DS_ERR_INVALID_ARG, input ? "input" : "output", " index ", index, " is out of range (the model has ",
               ids.size(), ")");
    const ds::Shape& dims = input ? m.input_dims[index] : m.output_dims[index];
    if (out_name) *out_name = m.values[ids[index]].name.c_str();
    if (out_rank) *out_rank = dims.size();
    if (out_dims) *out_dims = dims.data();
  });
}

DS_API ds_status ds_model_input_info(const ds_model* model, size_t index, const char** out_name,
                                     size_t* out_rank, const int64_t** out_dims) {
  return io_info(model, true, index, out_name, out_rank, out_dims);
}

DS_API ds_status ds_model_output_info(const ds_model* model, size_t index, const char** out_name,
                                      size_t* out_rank, const int64_t** out_dims) {
  return io_info(model, false, index, out_name, out_rank, out_dims);
}

DS_API ds_status ds_session_create(const ds_model* model, const ds_session_options* options,
                                   ds_session** out_session) {
  return guarded([&] {
    require(out_session != nullptr, "out_session is NULL");
    *out_session = nullptr;
    require(model != nullptr, "model is NULL");
    int threads = 1;
    bool profile = false;
    const char* kernels = nullptr;
    if (options) {
      // Options written against an older, shorter struct keep the defaults for missing fields.
      require(options->struct_size >= sizeof(size_t), "options->struct_size is too small");
      if (options->struct_size >= offsetof(ds_session_options, threads) + sizeof(int)) threads = options->threads;
      if (options->struct_size >= offsetof(ds_session_options, profile) + sizeof(int)) profile = options->profile != 0;
      if (options->struct_size >= offsetof(ds_session_options, kernels) + sizeof(const char*)) kernels = options->kernels;
    }
    auto s = std::make_unique<ds_session>();
    s->session = std::make_unique<ds::Session>(*model->model, threads, ds::parse_kernel_choices(kernels));
    s->session->set_profiling(profile);
    *out_session = s.release();
  });
}

DS_API void ds_session_free(ds_session* session) { delete session; }

DS_API ds_status ds_session_set_input(ds_session* session, size_t index, const float* data,
                                      const int64_t* dims, size_t rank) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    require(dims != nullptr || rank == 0, "dims is NULL");
    require(rank <= 64, "rank is over 64");
    if (!session->session->rebind_input(index, data, dims, rank))
      session->session->set_input(index, data, ds::Shape(dims, dims + rank));
  });
}

DS_API ds_status ds_session_infer(ds_session* session, const float* data, const int64_t* dims, size_t rank,
                                  float* dst, size_t capacity) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    require(dims != nullptr || rank == 0, "dims is NULL");
    require(rank <= 64, "rank is over 64");
    ds::Session& s = *session->session;
    if (!s.rebind_input(0, data, dims, rank)) s.set_input(0, data, ds::Shape(dims, dims + rank));
    s.run();
    s.get_output(0, dst, capacity);
  });
}

DS_API ds_status ds_session_run(ds_session* session) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    session->session->run();
  });
}

DS_API ds_status ds_session_output_shape(const ds_session* session, size_t index, size_t* out_rank,
                                         const int64_t** out_dims) {
  return guarded([&] {
    require(session && out_rank && out_dims, "session, out_rank or out_dims is NULL");
    const ds::Shape& s = session->session->output_shape(index);
    *out_rank = s.size();
    *out_dims = s.data();
  });
}

DS_API ds_status ds_session_get_output(const ds_session* session, size_t index, float* dst,
                                       size_t capacity) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    session->session->get_output(index, dst, capacity);
  });
}

DS_API ds_status ds_session_memory_info(const ds_session* session, size_t* out_arena_bytes,
                                        size_t* out_sum_activation_bytes) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    const size_t arena = session->session->arena_bytes();
    const size_t sum = session->session->activation_bytes();
    if (out_arena_bytes) *out_arena_bytes = arena;
    if (out_sum_activation_bytes) *out_sum_activation_bytes = sum;
  });
}

DS_API ds_status ds_session_node_count(const ds_session* session, size_t* out_count) {
  return guarded([&] {
    require(session && out_count, "session or out_count is NULL");
    *out_count = session->session->node_count();
  });
}

DS_API ds_status ds_session_node_profile(const ds_session* session, size_t index, const char** out_name,
                                         const char** out_op, uint64_t* out_runs, uint64_t* out_total_ns) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    const ds::Session& s = *session->session;
    if (index >= s.node_count())
      ds::fail(DS_ERR_INVALID_ARG, "node index ", index, " is out of range (the model has ", s.node_count(), " nodes)");
    const ds::NodeProfile np = s.node_profile(index);
    if (out_name) *out_name = np.name;
    if (out_op) *out_op = np.op;
    if (out_runs) *out_runs = np.runs;
    if (out_total_ns) *out_total_ns = np.total_ns;
  });
}

DS_API ds_status ds_session_node_kernel(const ds_session* session, size_t index, const char** out_kernel,
                                        const char** out_choices) {
  return guarded([&] {
    require(session != nullptr, "session is NULL");
    const ds::Session& s = *session->session;
    if (index >= s.node_count())
      ds::fail(DS_ERR_INVALID_ARG, "node index ", index, " is out of range (the model has ", s.node_count(), " nodes)");
    if (out_kernel) *out_kernel = s.node_kernel(index);
    if (out_choices) *out_choices = s.node_kernel_choices(index);
  });
}

}  // extern "C"
