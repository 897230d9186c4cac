// Generates bit-exact reference fixtures for stepscore's quant module from
// llama.cpp's own ggml-quants.c (reference dequantizers and the *_ref
// activation quantizers). Build and run with build.sh; see README.md.
//
// Fixture format (all little endian), one file per case:
//   magic "SSQF", u32 version (1), u32 kind, u32 ggml type id, u32 n (elements)
//   kind 1 (dequant):  n/blk*bytes raw block bytes, then n f32 outputs
//   kind 2 (quantize): n f32 inputs, then the quantized blocks as ggml lays them out
//   kind 3 (convert):  n u32 f32 bit patterns, then n u16 results (f16 or bf16)
//   kind 4 (f16 table): n = 65536; one u64 FNV-1a hash over the f32 bits of
//                       GGML_FP16_TO_FP32(h) for every h (exhaustive, compact)

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGML_COMMON_DECL_C
#include "ggml-common.h"
#include "ggml-impl.h"
#include "ggml-quants.h"

// ggml-quants.c calls these only from paths we do not use (row validation,
// importance-matrix quantizers); the stubs keep the link minimal.
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt);
    abort();
}
size_t ggml_row_size(enum ggml_type type, int64_t ne) { (void) type; (void) ne; abort(); }
const char * ggml_type_name(enum ggml_type type) { (void) type; return "?"; }
size_t ggml_type_size(enum ggml_type type) { (void) type; abort(); }

// splitmix64: fixed seed, same stream on every machine.
static uint64_t rng_state = 0x5eed5eed12345678ULL;
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
// uniform in [0, 1)
static float next_unit(void) { return (float) (next_u64() >> 40) / (float) (1 << 24); }
static float next_sym(void) { return 2.0f * next_unit() - 1.0f; }

// A finite scale of either sign spanning ~6 decades, as real models have.
static ggml_half rand_scale(void) {
    float mag = powf(10.0f, -5.0f + 5.0f * next_unit());
    return GGML_FP32_TO_FP16(next_u64() & 1 ? -mag : mag);
}
static ggml_half rand_pos_scale(void) {
    return GGML_FP32_TO_FP16(powf(10.0f, -5.0f + 5.0f * next_unit()));
}

static const char * out_dir;

static FILE * open_fixture(const char * name, uint32_t kind, uint32_t type_id, uint32_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", out_dir, name);
    FILE * f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    uint32_t hdr[5] = { 0, 1, kind, type_id, n };
    memcpy(&hdr[0], "SSQF", 4);
    fwrite(hdr, sizeof hdr, 1, f);
    return f;
}

static void fill_random(uint8_t * p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t) next_u64();
}

typedef void (*dequant_fn)(const void *, float *, int64_t);

// Random blocks: random bytes everywhere, then the f16 super-scales replaced
// by finite values (random bits would give NaN/Inf and test nothing useful).
static void dequant_case(const char * name, uint32_t type_id, size_t blk_elems, size_t blk_bytes, size_t n_blocks,
                         dequant_fn fn, const size_t * half_offsets, size_t n_half) {
    size_t n = blk_elems * n_blocks;
    uint8_t * raw = malloc(blk_bytes * n_blocks);
    float * out = malloc(n * sizeof(float));
    fill_random(raw, blk_bytes * n_blocks);
    for (size_t b = 0; b < n_blocks; b++) {
        for (size_t h = 0; h < n_half; h++) {
            // the first half of each block type is the scale, which may be
            // negative; later halves are mins (dmin), kept positive like ggml's quantizers
            ggml_half v = h == 0 ? rand_scale() : rand_pos_scale();
            memcpy(raw + b * blk_bytes + half_offsets[h], &v, 2);
        }
    }
    fn(raw, out, (int64_t) n);
    FILE * f = open_fixture(name, 1, type_id, (uint32_t) n);
    fwrite(raw, blk_bytes, n_blocks, f);
    fwrite(out, sizeof(float), n, f);
    fclose(f);
    free(raw);
    free(out);
}

#define DQ(fn) ((dequant_fn) (void (*)(void)) (fn))

static void dq_f16(const void * x, float * y, int64_t k) {
    const ggml_half * h = x;
    for (int64_t i = 0; i < k; i++) y[i] = GGML_FP16_TO_FP32(h[i]);
}
static void dq_bf16(const void * x, float * y, int64_t k) {
    const ggml_bf16_t * h = x;
    for (int64_t i = 0; i < k; i++) y[i] = GGML_BF16_TO_FP32(h[i]);
}

// Activation rows: mixed magnitudes per block, an all-zero block, blocks with
// a negative extreme (q8_K keys on the signed max), exact ties at .5 steps.
static void fill_activations(float * x, size_t n, size_t blk) {
    for (size_t b = 0; b < n / blk; b++) {
        float * v = x + b * blk;
        int mode = (int) (b % 6);
        float scale = powf(10.0f, -3.0f + 5.0f * next_unit());
        for (size_t j = 0; j < blk; j++) v[j] = scale * next_sym();
        if (mode == 1) {
            for (size_t j = 0; j < blk; j++) v[j] = 0.0f;
        } else if (mode == 2) {
            v[next_u64() % blk] = -4.0f * scale;
        } else if (mode == 3) {
            // amax 127 makes d = 1, so these land exactly on .5 ties
            for (size_t j = 0; j < blk; j++) v[j] = (float) ((int) (next_u64() % 253) - 126) + 0.5f;
            v[0] = 127.0f;
        } else if (mode == 4) {
            // outliers, like real activations
            for (size_t j = 0; j < blk; j += 7) v[j] *= 40.0f;
        }
    }
}

typedef void (*quant_fn)(const float *, void *, int64_t);
#define QF(fn) ((quant_fn) (void (*)(void)) (fn))

static void quant_case(const char * name, uint32_t type_id, size_t blk_elems, size_t blk_bytes, size_t n_blocks,
                       quant_fn fn) {
    size_t n = blk_elems * n_blocks;
    float * x = malloc(n * sizeof(float));
    // calloc: quantize_row_q8_K_ref leaves bsums untouched for all-zero blocks
    uint8_t * q = calloc(n_blocks, blk_bytes);
    fill_activations(x, n, blk_elems);
    fn(x, q, (int64_t) n);
    FILE * f = open_fixture(name, 2, type_id, (uint32_t) n);
    fwrite(x, sizeof(float), n, f);
    fwrite(q, blk_bytes, n_blocks, f);
    fclose(f);
    free(x);
    free(q);
}

// f32 -> f16 / bf16 on random bit patterns plus the edge cases that matter.
static void convert_case(const char * name, uint32_t type_id, int bf16) {
    enum { N = 4096 };
    static uint32_t bits[N];
    static uint16_t out[N];
    const uint32_t edges[] = { 0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffc00001,
                               0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0x33000000, 0x33000001, 0x387fc000,
                               0x38800000, 0x3f800000, 0x3f801000, 0x3f803000, 0x3f808000, 0x3f818000, 0x00000001,
                               0x007fffff, 0x7f7fffff, 0xbf800000, 0x3effffff };
    size_t ne = sizeof edges / sizeof edges[0];
    for (size_t i = 0; i < N; i++) {
        if (i < ne) {
            bits[i] = edges[i];
        } else if (i % 2) {
            bits[i] = (uint32_t) next_u64();
        } else {
            // values inside the f16 range, where rounding is the interesting part
            float v = next_sym() * powf(2.0f, -26.0f + 42.0f * next_unit());
            memcpy(&bits[i], &v, 4);
        }
        float v;
        memcpy(&v, &bits[i], 4);
        if (bf16) {
            ggml_bf16_t h = GGML_FP32_TO_BF16(v);
            out[i] = h.bits;
        } else {
            out[i] = GGML_FP32_TO_FP16(v);
        }
    }
    FILE * f = open_fixture(name, 3, type_id, N);
    fwrite(bits, 4, N, f);
    fwrite(out, 2, N, f);
    fclose(f);
}

static void f16_table_case(void) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t i = 0; i < 65536; i++) {
        float v = GGML_FP16_TO_FP32((ggml_half) i);
        uint32_t b;
        memcpy(&b, &v, 4);
        for (int k = 0; k < 4; k++) {
            h ^= (b >> (8 * k)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    }
    FILE * f = open_fixture("f16_to_f32_all", 4, GGML_TYPE_F16, 65536);
    fwrite(&h, 8, 1, f);
    fclose(f);
}

int main(int argc, char ** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];

    // element counts: 64 blocks of 32, 12 super-blocks of 256
    const size_t nb32 = 64, nbk = 12;

    {
        size_t n = 1024;
        float * v = malloc(n * 4);
        for (size_t i = 0; i < n; i++) v[i] = next_sym() * powf(10.0f, -4.0f + 8.0f * next_unit());
        FILE * f = open_fixture("dequant_F32", 1, GGML_TYPE_F32, (uint32_t) n);
        fwrite(v, 4, n, f);
        fwrite(v, 4, n, f);
        fclose(f);
        free(v);
    }
    dequant_case("dequant_F16", GGML_TYPE_F16, 1, 2, 1024, dq_f16, NULL, 0);
    dequant_case("dequant_BF16", GGML_TYPE_BF16, 1, 2, 1024, dq_bf16, NULL, 0);

    const size_t off_d[] = { 0 };
    const size_t off_dm[] = { 0, 2 };
    dequant_case("dequant_Q4_0", GGML_TYPE_Q4_0, QK4_0, sizeof(block_q4_0), nb32, DQ(dequantize_row_q4_0), off_d, 1);
    dequant_case("dequant_Q4_1", GGML_TYPE_Q4_1, QK4_1, sizeof(block_q4_1), nb32, DQ(dequantize_row_q4_1), off_dm, 2);
    dequant_case("dequant_Q5_0", GGML_TYPE_Q5_0, QK5_0, sizeof(block_q5_0), nb32, DQ(dequantize_row_q5_0), off_d, 1);
    dequant_case("dequant_Q5_1", GGML_TYPE_Q5_1, QK5_1, sizeof(block_q5_1), nb32, DQ(dequantize_row_q5_1), off_dm, 2);
    dequant_case("dequant_Q8_0", GGML_TYPE_Q8_0, QK8_0, sizeof(block_q8_0), nb32, DQ(dequantize_row_q8_0), off_d, 1);

    const size_t off_q2k[] = { offsetof(block_q2_K, d), offsetof(block_q2_K, dmin) };
    const size_t off_q3k[] = { offsetof(block_q3_K, d) };
    const size_t off_q4k[] = { offsetof(block_q4_K, d), offsetof(block_q4_K, dmin) };
    const size_t off_q5k[] = { offsetof(block_q5_K, d), offsetof(block_q5_K, dmin) };
    const size_t off_q6k[] = { offsetof(block_q6_K, d) };
    dequant_case("dequant_Q2_K", GGML_TYPE_Q2_K, QK_K, sizeof(block_q2_K), nbk, DQ(dequantize_row_q2_K), off_q2k, 2);
    dequant_case("dequant_Q3_K", GGML_TYPE_Q3_K, QK_K, sizeof(block_q3_K), nbk, DQ(dequantize_row_q3_K), off_q3k, 1);
    dequant_case("dequant_Q4_K", GGML_TYPE_Q4_K, QK_K, sizeof(block_q4_K), nbk, DQ(dequantize_row_q4_K), off_q4k, 2);
    dequant_case("dequant_Q5_K", GGML_TYPE_Q5_K, QK_K, sizeof(block_q5_K), nbk, DQ(dequantize_row_q5_K), off_q5k, 2);
    dequant_case("dequant_Q6_K", GGML_TYPE_Q6_K, QK_K, sizeof(block_q6_K), nbk, DQ(dequantize_row_q6_K), off_q6k, 1);

    quant_case("quantize_Q8_0", GGML_TYPE_Q8_0, QK8_0, sizeof(block_q8_0), 96, QF(quantize_row_q8_0_ref));
    quant_case("quantize_Q8_1", GGML_TYPE_Q8_1, QK8_1, sizeof(block_q8_1), 96, QF(quantize_row_q8_1_ref));
    quant_case("quantize_Q8_K", GGML_TYPE_Q8_K, QK_K, sizeof(block_q8_K), 18, QF(quantize_row_q8_K_ref));

    convert_case("convert_f32_to_F16", GGML_TYPE_F16, 0);
    convert_case("convert_f32_to_BF16", GGML_TYPE_BF16, 1);
    f16_table_case();
    return 0;
}
