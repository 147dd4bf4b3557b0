/* threads: a threaded PMDK program, plain C against the documented libpmemobj API, built
 * unmodified against PMDK and against locsim-pmemobj (tests/pmdk.rs, docs/pmdk.md).
 *
 * THREADS threads (the main thread is the first) each run TXS transactions on one new pool:
 * most move an amount between two accounts of the root's shared array, holding the two
 * accounts' PMEMmutexes (taken in ascending order, released after TX_END), and one in four of
 * them appends an entry (TX_NEW) to the thread's own persistent list; every eighth appends to
 * a global list under the root's global PMEMmutex (TX_BEGIN_PARAM with TX_PARAM_MUTEX); every
 * tenth is aborted (pmemobj_tx_abort) after its work, allocation included. The choices come
 * from a fixed random sequence per thread, so what the program prints does not depend on how
 * the threads interleave. At the end it checks itself: the total balance is what it was, and
 * every list holds its count of entries, its owner's, numbered down to 1, whose amounts add up
 * to the list's sum.
 *
 *   threads POOL [THREADS [TXS]]      (defaults 4 and 300; POOL must not exist)
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <libpmemobj.h>

#define ACCOUNTS 64
#define MAX_THREADS 16
#define START 1000

POBJ_LAYOUT_BEGIN(threads);
POBJ_LAYOUT_ROOT(threads, struct root);
POBJ_LAYOUT_TOID(threads, struct entry);
POBJ_LAYOUT_END(threads);

struct entry {
	uint64_t owner;
	uint64_t seq;
	int64_t amount;
	TOID(struct entry) next;
};

/* Each account and each thread's list on lines of their own. */
struct account {
	PMEMmutex lock;
	int64_t balance;
	char pad[56];
};

struct tlist {
	TOID(struct entry) head;
	uint64_t len;
	int64_t sum;
	char pad[32];
};

struct root {
	PMEMmutex global;
	TOID(struct entry) ghead;
	uint64_t gcount;
	int64_t gsum;
	char pad[32];
	struct tlist list[MAX_THREADS];
	struct account acct[ACCOUNTS];
};

struct worker {
	PMEMobjpool *pop;
	struct root *rp;
	unsigned id;
	long txs;
	long committed, aborted;
	pthread_t tid;
};

/* Push a new entry on the list at *head (added by the caller), in the running transaction. */
static void push(TOID(struct entry) *head, unsigned owner, uint64_t seq, int64_t amount)
{
	TOID(struct entry) e = TX_NEW(struct entry);
	D_RW(e)->owner = owner;
	D_RW(e)->seq = seq;
	D_RW(e)->amount = amount;
	D_RW(e)->next = *head;
	*head = e;
}

/* Append an entry of `amount` to the global list, under the global lock. */
static void global_tx(struct worker *w, int64_t amount, int cancel)
{
	struct root *rp = w->rp;
	TX_BEGIN_PARAM(w->pop, TX_PARAM_MUTEX, &rp->global, TX_PARAM_NONE) {
		TX_ADD_FIELD_DIRECT(rp, ghead);
		TX_ADD_FIELD_DIRECT(rp, gcount);
		TX_ADD_FIELD_DIRECT(rp, gsum);
		push(&rp->ghead, w->id, rp->gcount + 1, amount);
		rp->gcount++;
		rp->gsum += amount;
		if (cancel)
			pmemobj_tx_abort(ECANCELED);
	} TX_ONCOMMIT {
		w->committed++;
	} TX_ONABORT {
		w->aborted++;
	} TX_END
}

/* Move `amount` from account `from` to `to`, under their locks; append it to the thread's
 * list when `append`. */
static void transfer_tx(struct worker *w, unsigned from, unsigned to, int64_t amount, int append, int cancel)
{
	struct root *rp = w->rp;
	unsigned lo = from < to ? from : to, hi = from < to ? to : from;
	pmemobj_mutex_lock(w->pop, &rp->acct[lo].lock);
	pmemobj_mutex_lock(w->pop, &rp->acct[hi].lock);
	TX_BEGIN(w->pop) {
		TX_ADD_FIELD_DIRECT(&rp->acct[from], balance);
		TX_ADD_FIELD_DIRECT(&rp->acct[to], balance);
		rp->acct[from].balance -= amount;
		rp->acct[to].balance += amount;
		if (append) {
			struct tlist *l = &rp->list[w->id];
			TX_ADD_DIRECT(l);
			push(&l->head, w->id, l->len + 1, amount);
			l->len++;
			l->sum += amount;
		}
		if (cancel)
			pmemobj_tx_abort(ECANCELED);
	} TX_ONCOMMIT {
		w->committed++;
	} TX_ONABORT {
		w->aborted++;
	} TX_END
	pmemobj_mutex_unlock(w->pop, &rp->acct[hi].lock);
	pmemobj_mutex_unlock(w->pop, &rp->acct[lo].lock);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t x = 88172645463325252ull + 7919u * w->id; /* xorshift64 */
	for (long i = 0; i < w->txs; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		int cancel = i % 10 == 9;
		int64_t amount = (int64_t)((x >> 20) % 100);
		if (i % 8 == 7) {
			global_tx(w, amount, cancel);
		} else {
			unsigned from = x % ACCOUNTS;
			unsigned to = (from + 1 + (unsigned)((x >> 8) % (ACCOUNTS - 1))) % ACCOUNTS;
			transfer_tx(w, from, to, amount, (x >> 40) % 4 == 0, cancel);
		}
	}
	return NULL;
}

/* The entries of a list, checked: each `owner`'s (any when owner < 0), numbered from `len`
 * down to 1, their amounts adding up to `sum`. The count, or -1 when a check fails. */
static long walk(TOID(struct entry) e, long owner, uint64_t len, int64_t sum)
{
	long n = 0;
	int64_t s = 0;
	for (; !TOID_IS_NULL(e); e = D_RO(e)->next, n++) {
		if ((owner >= 0 && D_RO(e)->owner != (uint64_t)owner) || D_RO(e)->seq != len - (uint64_t)n)
			return -1;
		s += D_RO(e)->amount;
	}
	return (uint64_t)n == len && s == sum ? n : -1;
}

int main(int argc, char *argv[])
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: %s POOL [THREADS [TXS]]\n", argv[0]);
		return 2;
	}
	int threads = argc > 2 ? atoi(argv[2]) : 4;
	long txs = argc > 3 ? atol(argv[3]) : 300;
	if (threads < 1 || threads > MAX_THREADS || txs < 0) {
		fprintf(stderr, "THREADS 1..%d, TXS 0 or more\n", MAX_THREADS);
		return 2;
	}
	PMEMobjpool *pop = pmemobj_create(argv[1], POBJ_LAYOUT_NAME(threads), PMEMOBJ_MIN_POOL, 0666);
	if (pop == NULL) {
		fprintf(stderr, "%s: %s\n", argv[1], pmemobj_errormsg());
		return 1;
	}
	TOID(struct root) root = POBJ_ROOT(pop, struct root);
	struct root *rp = D_RW(root);
	TX_BEGIN(pop) {
		TX_ADD(root);
		for (int a = 0; a < ACCOUNTS; a++)
			rp->acct[a].balance = START;
	} TX_ONABORT {
		fprintf(stderr, "the first transaction aborted\n");
		abort();
	} TX_END

	struct worker w[MAX_THREADS];
	for (int t = 0; t < threads; t++) {
		w[t] = (struct worker){ .pop = pop, .rp = rp, .id = (unsigned)t, .txs = txs };
		if (t > 0 && pthread_create(&w[t].tid, NULL, work, &w[t]) != 0) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}
	work(&w[0]);
	long committed = 0, aborted = 0, entries = 0;
	int ok = 1;
	for (int t = 0; t < threads; t++) {
		if (t > 0)
			pthread_join(w[t].tid, NULL);
		committed += w[t].committed;
		aborted += w[t].aborted;
		struct tlist *l = &rp->list[t];
		long n = walk(l->head, t, l->len, l->sum);
		if (n < 0) {
			fprintf(stderr, "thread %d's list is broken\n", t);
			ok = 0;
		}
		entries += n;
	}
	long global = walk(rp->ghead, -1, rp->gcount, rp->gsum);
	if (global < 0) {
		fprintf(stderr, "the global list is broken\n");
		ok = 0;
	}
	int64_t total = 0;
	for (int a = 0; a < ACCOUNTS; a++)
		total += rp->acct[a].balance;
	if (total != (int64_t)START * ACCOUNTS) {
		fprintf(stderr, "total balance %" PRId64 ", not %d\n", total, START * ACCOUNTS);
		ok = 0;
	}
	printf("%d threads, %ld transactions each: %ld committed, %ld aborted; total balance %" PRId64
	       "; %ld entries in the threads' lists, %ld in the global list\n",
	       threads, txs, committed, aborted, total, entries, global);
	pmemobj_close(pop);
	return ok ? 0 : 1;
}
