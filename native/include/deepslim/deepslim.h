/* deepslim runtime: the public C API.
 *
 * Every function returns a ds_status; results come back through out-parameters. On an error,
 * ds_last_error() returns a message for the calling thread that names what was wrong. No function
 * aborts, and no C++ exception crosses this boundary. Objects are opaque handles.
 *
 * Typical use:
 *   ds_model* m; ds_session* s;
 *   if (ds_model_load_file("lenet5.dsm", &m) != DS_OK) { puts(ds_last_error()); return 1; }
 *   ds_session_options o = DS_SESSION_OPTIONS_INIT; o.threads = 1;
 *   ds_session_create(m, &o, &s);
 *   ds_session_set_input(s, 0, data, dims, 4);
 *   ds_session_run(s);
 *   ds_session_get_output(s, 0, out, out_count);
 *   ds_session_free(s); ds_model_free(m);
 */
#ifndef DEEPSLIM_DEEPSLIM_H
#define DEEPSLIM_DEEPSLIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define DS_API __declspec(dllexport)
#else
#define DS_API __attribute__((visibility("default")))
#endif

typedef enum ds_status {
  DS_OK = 0,
  DS_ERR_INVALID_ARG = 1,    /* a NULL pointer, an index out of range, a bad option */
  DS_ERR_IO = 2,             /* the file could not be opened or read */
  DS_ERR_FORMAT = 3,         /* the file is not a valid .dsm (bad magic, field, offset, code) */
  DS_ERR_VERSION = 4,        /* the file's format version is not one this runtime reads */
  DS_ERR_CHECKSUM = 5,       /* a section or stream does not match its CRC-32 */
  DS_ERR_UNSUPPORTED_OP = 6, /* an op id or attribute this runtime does not implement */
  DS_ERR_SHAPE = 7,          /* an input or weight shape does not fit the graph */
  DS_ERR_OOM = 8,            /* memory could not be allocated */
  DS_ERR_INTERNAL = 9        /* a bug: please report it with the model */
} ds_status;

typedef struct ds_model ds_model;     /* a loaded, decoded model; read-only, shareable */
typedef struct ds_session ds_session; /* buffers and threads to run one model; one caller at a time */

/* The message of the last failed call on this thread ("" if none). Valid until the next call. */
DS_API const char* ds_last_error(void);
/* The status's name, e.g. "DS_ERR_FORMAT". */
DS_API const char* ds_status_name(ds_status status);
/* Runtime version string, e.g. "0.1.0", and the highest .dsm format version it reads. */
DS_API const char* ds_version(void);
DS_API uint32_t ds_format_version(void);

/* Load and decode a .dsm file from disk, or from memory (the bytes are copied as needed). */
DS_API ds_status ds_model_load_file(const char* path, ds_model** out_model);
DS_API ds_status ds_model_load_memory(const void* data, size_t size, ds_model** out_model);
DS_API void ds_model_free(ds_model* model);

/* Graph inputs and outputs. dims are -1 where the size is fixed only at run time (the batch).
 * The returned pointers stay valid while the model lives. */
DS_API ds_status ds_model_input_count(const ds_model* model, size_t* out_count);
DS_API ds_status ds_model_input_info(const ds_model* model, size_t index, const char** out_name,
                                     size_t* out_rank, const int64_t** out_dims);
DS_API ds_status ds_model_output_count(const ds_model* model, size_t* out_count);
DS_API ds_status ds_model_output_info(const ds_model* model, size_t index, const char** out_name,
                                      size_t* out_rank, const int64_t** out_dims);

typedef struct ds_session_options {
  size_t struct_size; /* sizeof(ds_session_options): lets the struct grow by appending */
  int threads;        /* worker threads, >= 1 */
  int profile;        /* nonzero: time every node of every run (ds_session_node_profile) */
  /* Per-node kernel choices, "node=kernel" entries separated by newlines or ';' (what
   * `deepslim tune` measures and caches beside the model), or NULL: every op's own rule. A node
   * that is not in the model, or a kernel its op does not have (ds_session_node_kernel lists
   * them), fails ds_session_create with DS_ERR_INVALID_ARG. A choice that does not apply to the
   * node's shapes leaves the op's rule in charge. */
  const char* kernels;
} ds_session_options;
#define DS_SESSION_OPTIONS_INIT {sizeof(ds_session_options), 1, 0, NULL}

DS_API ds_status ds_session_create(const ds_model* model, const ds_session_options* options,
                                   ds_session** out_session);
DS_API void ds_session_free(ds_session* session);

/* Bind input `index` to float32 NCHW data of the given shape. The data is read during
 * ds_session_run and must stay valid until then. A shape that the graph cannot take is refused
 * here with DS_ERR_SHAPE and a message naming the input, the expected and the given shape. With
 * several inputs, a shape that only disagrees with another input's (a new batch bound one input
 * at a time) is accepted here and, if the disagreement remains, refused by ds_session_run. */
DS_API ds_status ds_session_set_input(ds_session* session, size_t index, const float* data,
                                      const int64_t* dims, size_t rank);
DS_API ds_status ds_session_run(ds_session* session);
/* After a successful run: the output's shape (valid until the next set_input/run), and a copy of
 * its values into dst, which holds `capacity` floats (at least the output's element count). */
DS_API ds_status ds_session_output_shape(const ds_session* session, size_t index,
                                         size_t* out_rank, const int64_t** out_dims);
DS_API ds_status ds_session_get_output(const ds_session* session, size_t index, float* dst,
                                       size_t capacity);

/* The one-input, one-output case in one call: ds_session_set_input(session, 0, data, dims, rank),
 * ds_session_run, then ds_session_get_output(session, 0, dst, capacity). Each step's errors are
 * those of the call it stands for. The output's shape is ds_session_output_shape(session, 0). */
DS_API ds_status ds_session_infer(ds_session* session, const float* data, const int64_t* dims, size_t rank,
                                  float* dst, size_t capacity);

/* The activation memory planned for the currently bound input shapes (every input must be set):
 * out_arena_bytes is the size of the one arena that holds every intermediate and output
 * activation, buffers reused by liveness (each placed at a 64-byte aligned offset), plus, when a
 * batch runs its first nodes image by image (one image per thread), each thread's arena for one
 * image;
 * out_sum_activation_bytes is the sum of the sizes of all those activations, what separate
 * buffers would take. Graph inputs (the caller's memory) and constants are not counted.
 * Either out pointer may be NULL. */
DS_API ds_status ds_session_memory_info(const ds_session* session, size_t* out_arena_bytes,
                                        size_t* out_sum_activation_bytes);

/* Per-node timing of a session created with options.profile set: the graph's node count, and for
 * node `index` (in run order) its name, op name, how many runs timed it and their total wall time
 * in nanoseconds. Without profile, runs and total are 0. Names stay valid while the model lives. */
DS_API ds_status ds_session_node_count(const ds_session* session, size_t* out_count);
DS_API ds_status ds_session_node_profile(const ds_session* session, size_t index, const char** out_name,
                                         const char** out_op, uint64_t* out_runs, uint64_t* out_total_ns);

/* The kernel node `index` (in run order) runs, e.g. "winograd" ("" when its op has no kernel
 * choice), and the kernels its op can be asked for in options.kernels, comma-separated ("" when
 * none). Either out pointer may be NULL; the strings stay valid while the session lives. */
DS_API ds_status ds_session_node_kernel(const ds_session* session, size_t index, const char** out_kernel,
                                        const char** out_choices);

/* The SIMD level sessions created now use: "scalar", "avx2" or "avx512" (the best the CPU and
 * OS support, or DS_FORCE_ISA=scalar|avx2|avx512 when set). NULL when DS_FORCE_ISA names a level
 * that is unknown or unavailable here; ds_session_create then fails with DS_ERR_INVALID_ARG. */
DS_API const char* ds_isa(void);

#ifdef __cplusplus
}
#endif

#endif /* DEEPSLIM_DEEPSLIM_H */
