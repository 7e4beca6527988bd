// The C callbacks a program hands to MPI, called from Go (included by the
// cgo preambles of callbacks.go and objattr.go).

#include <stdint.h>

typedef void (*user_fn)(void *, void *, int *, int *);
typedef void (*user_fn_c)(void *, void *, long *, int *);
typedef void (*errh_fn)(int *, int *, ...);
typedef int (*copy_fn)(int, int, void *, void *, void *, int *);
typedef int (*delete_fn)(int, int, void *, void *);

static inline void call_user_fn(void *f, void *in, void *inout, int *len, int *dt) {
	((user_fn)f)(in, inout, len, dt);
}
static inline void call_user_fn_c(void *f, void *in, void *inout, long *len, int *dt) {
	((user_fn_c)f)(in, inout, len, dt);
}
static inline void call_errh(void *f, int *obj, int *code) { ((errh_fn)f)(obj, code); }
static inline int call_copy(void *f, int obj, int key, uintptr_t extra, uintptr_t in, uintptr_t *out, int *flag) {
	return ((copy_fn)f)(obj, key, (void *)extra, (void *)in, (void *)out, flag);
}
static inline int call_delete(void *f, int obj, int key, uintptr_t val, uintptr_t extra) {
	return ((delete_fn)f)(obj, key, (void *)val, (void *)extra);
}
