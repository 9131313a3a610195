/*
 * Stand-ins for the codec libraries Debian's libheif 1.15 links but compressd's HEIF decoder never
 * calls: x265 (HEVC encoding) and libaom (AV1 encoding, and decoding, which dav1d does here: libheif
 * prefers it). libheif 1.15 links them directly (no plugins), with BIND_NOW, so each of their
 * symbols must resolve when it loads; these entry points only ever answer "not available".
 * Carrying them instead would add 21 MB per CPU, and x265 is GPL-2.0-or-later. The same file is
 * linked twice, once per SONAME (scripts/heif-decoder.mjs); a libheif call into one of them fails
 * as an unsupported codec.
 */
#include <stddef.h>

#define AOM_CODEC_INCAPABLE 4

/* x265 */
const void *x265_api_get_199(int bit_depth) { (void)bit_depth; return NULL; }

/* libaom */
const void *aom_codec_av1_cx(void) { return NULL; }
const void *aom_codec_av1_dx(void) { return NULL; }
int aom_codec_control(void *ctx, int id, ...) { (void)ctx; (void)id; return AOM_CODEC_INCAPABLE; }
int aom_codec_dec_init_ver(void *ctx, const void *iface, const void *cfg, long flags, int ver) { (void)ctx; (void)iface; (void)cfg; (void)flags; (void)ver; return AOM_CODEC_INCAPABLE; }
int aom_codec_enc_init_ver(void *ctx, const void *iface, const void *cfg, long flags, int ver) { (void)ctx; (void)iface; (void)cfg; (void)flags; (void)ver; return AOM_CODEC_INCAPABLE; }
int aom_codec_enc_config_default(const void *iface, void *cfg, unsigned usage) { (void)iface; (void)cfg; (void)usage; return AOM_CODEC_INCAPABLE; }
int aom_codec_decode(void *ctx, const void *data, size_t size, void *user) { (void)ctx; (void)data; (void)size; (void)user; return AOM_CODEC_INCAPABLE; }
int aom_codec_encode(void *ctx, const void *img, long long pts, unsigned long duration, long flags) { (void)ctx; (void)img; (void)pts; (void)duration; (void)flags; return AOM_CODEC_INCAPABLE; }
int aom_codec_destroy(void *ctx) { (void)ctx; return AOM_CODEC_INCAPABLE; }
int aom_codec_set_option(void *ctx, const char *name, const char *value) { (void)ctx; (void)name; (void)value; return AOM_CODEC_INCAPABLE; }
const char *aom_codec_err_to_string(int err) { (void)err; return "AV1 is not available in compressd's HEIF decoder"; }
const char *aom_codec_iface_name(const void *iface) { (void)iface; return "none"; }
const char *aom_codec_version_str(void) { return "none"; }
int aom_codec_version(void) { return 0; }
const void *aom_codec_get_cx_data(void *ctx, const void **iter) { (void)ctx; (void)iter; return NULL; }
void *aom_codec_get_frame(void *ctx, const void **iter) { (void)ctx; (void)iter; return NULL; }
void *aom_img_alloc(void *img, int fmt, unsigned w, unsigned h, unsigned align) { (void)img; (void)fmt; (void)w; (void)h; (void)align; return NULL; }
void aom_img_free(void *img) { (void)img; }
