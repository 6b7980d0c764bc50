/* classify MODEL.dsm INPUT.bin
 *
 * Runs a classifier on one input: INPUT.bin holds the raw float32 values of the model's first input
 * with batch 1 (NCHW, little-endian). Prints the five highest-scoring classes of the first output. */
#include <stdio.h>
#include <stdlib.h>

#include "deepslim/deepslim.h"

static int fail(const char* what, ds_status status) {
  fprintf(stderr, "classify: %s failed: %s: %s\n", what, ds_status_name(status), ds_last_error());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.dsm INPUT.bin\n  INPUT.bin: raw float32 of the model's input shape with batch 1\n",
            argv[0]);
    return 2;
  }
  ds_model* model = NULL;
  ds_session* session = NULL;
  float* input = NULL;
  float* output = NULL;
  int rc = 1;
  ds_status st;

  if ((st = ds_model_load_file(argv[1], &model)) != DS_OK) return fail("loading the model", st);

  const char* in_name;
  size_t rank;
  const int64_t* model_dims;
  if ((st = ds_model_input_info(model, 0, &in_name, &rank, &model_dims)) != DS_OK) {
    rc = fail("reading the input info", st);
    goto done;
  }
  int64_t dims[8];
  size_t count = 1;
  for (size_t i = 0; i < rank && i < 8; ++i) {
    dims[i] = model_dims[i] == -1 ? 1 : model_dims[i]; /* batch 1 */
    count *= (size_t)dims[i];
  }

  FILE* f = fopen(argv[2], "rb");
  if (!f) {
    fprintf(stderr, "classify: cannot open input '%s'\n", argv[2]);
    goto done;
  }
  input = malloc(count * sizeof(float));
  size_t got = input ? fread(input, sizeof(float), count, f) : 0;
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (!input || got != count || extra) {
    fprintf(stderr, "classify: '%s' must hold exactly %zu float32 values (%zu bytes) for input '%s'\n",
            argv[2], count, count * sizeof(float), in_name);
    goto done;
  }

  ds_session_options options = DS_SESSION_OPTIONS_INIT;
  if ((st = ds_session_create(model, &options, &session)) != DS_OK) { rc = fail("creating the session", st); goto done; }
  if ((st = ds_session_set_input(session, 0, input, dims, rank)) != DS_OK) { rc = fail("setting the input", st); goto done; }
  if ((st = ds_session_run(session)) != DS_OK) { rc = fail("running", st); goto done; }

  size_t out_rank;
  const int64_t* out_dims;
  if ((st = ds_session_output_shape(session, 0, &out_rank, &out_dims)) != DS_OK) { rc = fail("reading the output shape", st); goto done; }
  size_t n = 1;
  for (size_t i = 0; i < out_rank; ++i) n *= (size_t)out_dims[i];
  output = malloc(n * sizeof(float));
  if (!output) { fprintf(stderr, "classify: out of memory\n"); goto done; }
  if ((st = ds_session_get_output(session, 0, output, n)) != DS_OK) { rc = fail("reading the output", st); goto done; }

  /* Top-5 by repeated selection: n is a class count, small. */
  printf("rank  class  score\n");
  for (int k = 0; k < 5 && (size_t)k < n; ++k) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
      if (output[i] > output[best]) best = i;
    printf("%4d  %5zu  %.6f\n", k + 1, best, output[best]);
    output[best] = -1e38f;
  }
  rc = 0;

done:
  free(output);
  free(input);
  ds_session_free(session);
  ds_model_free(model);
  return rc;
}
