/* libpmemobj/tx.h: transactions (locsim). TX_BEGIN ... TX_END is the documented setjmp-based
 * block of pmemobj_tx_begin(3): the library longjmps back to the block's jmp_buf when the
 * transaction aborts, and the block runs the stage each pmemobj_tx_process moves it to. */
#ifndef LIBPMEMOBJ_TX_H
#define LIBPMEMOBJ_TX_H 1

#include <errno.h>
#include <setjmp.h>
#include <string.h>
#include <libpmemobj/base.h>
#include <libpmemobj/types.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pobj_tx_stage {
	TX_STAGE_NONE,
	TX_STAGE_WORK,
	TX_STAGE_ONCOMMIT,
	TX_STAGE_ONABORT,
	TX_STAGE_FINALLY,
	MAX_TX_STAGE
};

enum pobj_tx_param {
	TX_PARAM_NONE,
	TX_PARAM_MUTEX,
	TX_PARAM_RWLOCK,
	TX_PARAM_CB,
};

typedef void (*pmemobj_tx_callback)(PMEMobjpool *pop, enum pobj_tx_stage stage, void *arg);

#define POBJ_XADD_NO_FLUSH POBJ_FLAG_NO_FLUSH
#define POBJ_XADD_NO_SNAPSHOT POBJ_FLAG_NO_SNAPSHOT
#define POBJ_XADD_ASSUME_INITIALIZED POBJ_FLAG_ASSUME_INITIALIZED
#define POBJ_XADD_NO_ABORT POBJ_FLAG_TX_NO_ABORT
#define POBJ_XFREE_NO_ABORT POBJ_FLAG_TX_NO_ABORT

enum pobj_tx_stage pmemobj_tx_stage(void);
/* Begin a transaction (nested in the thread's open one, if any); the parameters after `env`
 * are TX_PARAM_MUTEX/TX_PARAM_RWLOCK and a lock, or TX_PARAM_CB, a callback and its argument,
 * ended by TX_PARAM_NONE. */
int pmemobj_tx_begin(PMEMobjpool *pop, jmp_buf env, ...);
int pmemobj_tx_lock(enum pobj_tx_param type, void *lockp);
void pmemobj_tx_abort(int errnum);
void pmemobj_tx_commit(void);
int pmemobj_tx_end(void);
void pmemobj_tx_process(void);
int pmemobj_tx_errno(void);

int pmemobj_tx_add_range(PMEMoid oid, uint64_t off, size_t size);
int pmemobj_tx_add_range_direct(const void *ptr, size_t size);
int pmemobj_tx_xadd_range(PMEMoid oid, uint64_t off, size_t size, uint64_t flags);
int pmemobj_tx_xadd_range_direct(const void *ptr, size_t size, uint64_t flags);

PMEMoid pmemobj_tx_alloc(size_t size, uint64_t type_num);
PMEMoid pmemobj_tx_zalloc(size_t size, uint64_t type_num);
PMEMoid pmemobj_tx_xalloc(size_t size, uint64_t type_num, uint64_t flags);
PMEMoid pmemobj_tx_realloc(PMEMoid oid, size_t size, uint64_t type_num);
PMEMoid pmemobj_tx_zrealloc(PMEMoid oid, size_t size, uint64_t type_num);
PMEMoid pmemobj_tx_strdup(const char *s, uint64_t type_num);
int pmemobj_tx_free(PMEMoid oid);
int pmemobj_tx_xfree(PMEMoid oid, uint64_t flags);

#define TX_BEGIN_PARAM(pop, ...)                                                                   \
	{                                                                                          \
		jmp_buf _tx_env;                                                                   \
		enum pobj_tx_stage _stage;                                                         \
		int _pobj_errno;                                                                   \
		if (setjmp(_tx_env)) {                                                             \
			errno = pmemobj_tx_errno();                                                \
		} else {                                                                           \
			_pobj_errno = pmemobj_tx_begin(pop, _tx_env, ##__VA_ARGS__, TX_PARAM_NONE); \
			if (_pobj_errno)                                                           \
				errno = _pobj_errno;                                               \
		}                                                                                  \
		while ((_stage = pmemobj_tx_stage()) != TX_STAGE_NONE) {                           \
			switch (_stage) {                                                          \
			case TX_STAGE_WORK:
#define TX_BEGIN(pop) TX_BEGIN_PARAM(pop, TX_PARAM_NONE)
#define TX_BEGIN_LOCK TX_BEGIN_PARAM
#define TX_BEGIN_CB(pop, cb, arg, ...) TX_BEGIN_PARAM(pop, TX_PARAM_CB, cb, arg, ##__VA_ARGS__)
#define TX_ONABORT                                                                                 \
	pmemobj_tx_process();                                                                      \
	break;                                                                                     \
	case TX_STAGE_ONABORT:
#define TX_ONCOMMIT                                                                                \
	pmemobj_tx_process();                                                                      \
	break;                                                                                     \
	case TX_STAGE_ONCOMMIT:
#define TX_FINALLY                                                                                 \
	pmemobj_tx_process();                                                                      \
	break;                                                                                     \
	case TX_STAGE_FINALLY:
#define TX_END                                                                                     \
	pmemobj_tx_process();                                                                      \
	break;                                                                                     \
	default:                                                                                   \
		pmemobj_tx_process();                                                              \
		break;                                                                             \
		}                                                                                  \
		}                                                                                  \
		_pobj_errno = pmemobj_tx_end();                                                    \
		if (_pobj_errno)                                                                   \
			errno = _pobj_errno;                                                       \
	}

#define TX_ADD(o) pmemobj_tx_add_range((o).oid, 0, sizeof(*(o)._type))
#define TX_ADD_FIELD(o, field) TX_ADD_DIRECT(&(D_RO(o)->field))
#define TX_ADD_DIRECT(p) pmemobj_tx_add_range_direct((p), sizeof(*(p)))
#define TX_ADD_FIELD_DIRECT(p, field) pmemobj_tx_add_range_direct(&(p)->field, sizeof((p)->field))
#define TX_XADD(o, flags) pmemobj_tx_xadd_range((o).oid, 0, sizeof(*(o)._type), flags)
#define TX_XADD_FIELD(o, field, flags) TX_XADD_DIRECT(&(D_RO(o)->field), flags)
#define TX_XADD_DIRECT(p, flags) pmemobj_tx_xadd_range_direct((p), sizeof(*(p)), flags)
#define TX_XADD_FIELD_DIRECT(p, field, flags)                                                      \
	pmemobj_tx_xadd_range_direct(&(p)->field, sizeof((p)->field), flags)

#define TX_NEW(t) ((TOID(t))pmemobj_tx_alloc(sizeof(t), TOID_TYPE_NUM(t)))
#define TX_ALLOC(t, size) ((TOID(t))pmemobj_tx_alloc((size), TOID_TYPE_NUM(t)))
#define TX_ZNEW(t) ((TOID(t))pmemobj_tx_zalloc(sizeof(t), TOID_TYPE_NUM(t)))
#define TX_ZALLOC(t, size) ((TOID(t))pmemobj_tx_zalloc((size), TOID_TYPE_NUM(t)))
#define TX_XALLOC(t, size, flags) ((TOID(t))pmemobj_tx_xalloc((size), TOID_TYPE_NUM(t), (flags)))
#define TX_REALLOC(o, size) ((__typeof__(o))pmemobj_tx_realloc((o).oid, (size), TOID_TYPE_NUM_OF(o)))
#define TX_ZREALLOC(o, size) ((__typeof__(o))pmemobj_tx_zrealloc((o).oid, (size), TOID_TYPE_NUM_OF(o)))
#define TX_STRDUP(s, type_num) pmemobj_tx_strdup((s), (type_num))
#define TX_FREE(o) pmemobj_tx_free((o).oid)
#define TX_XFREE(o, flags) pmemobj_tx_xfree((o).oid, (flags))

#define TX_SET(o, field, value) (TX_ADD_FIELD(o, field), D_RW(o)->field = (value))
#define TX_SET_DIRECT(p, field, value) (TX_ADD_FIELD_DIRECT(p, field), (p)->field = (value))

static inline void *TX_MEMCPY(void *dest, const void *src, size_t num)
{
	pmemobj_tx_add_range_direct(dest, num);
	return memcpy(dest, src, num);
}
static inline void *TX_MEMSET(void *dest, int c, size_t num)
{
	pmemobj_tx_add_range_direct(dest, num);
	return memset(dest, c, num);
}

#ifdef __cplusplus
}
#endif
#endif
