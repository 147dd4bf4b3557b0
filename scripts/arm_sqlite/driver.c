/*
 * Replays a journal trace (the text form `locsim journal --emit-trace` prints) through SQLite as
 * locsim's replayer does (src/journal/replay.rs): each database opened with the same settings,
 * the setup part with journal_mode=OFF, then every database switched to the measured journal
 * mode, and each measured command run as `execute_counted` runs it (each statement prepared,
 * stepped once, finalized). Each measured command is one region between two marker system
 * calls, which the QEMU plugin icount.c counts in ARM instructions; this program prints the
 * virtual-machine instructions of each command (SQLITE_STMTSTATUS_VM_STEP), one line each,
 * for the caller to check against locsim's.
 *
 *   driver run delete|off TRACE DIR     replay TRACE with its database files in DIR
 *   driver selftest                      regions of known length (see main)
 *
 * The database files live in DIR through SQLite's own unix VFS: its system calls run on the
 * host under qemu-arm and are not counted; the journal's PCM structures are locsim's model.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "sqlite3.h"

/* Must match icount.c. */
#define MARK 0x7f0f

static void mark(long what)
{
    syscall(MARK, what);
}

/* locsim's `replay::SETTINGS`. */
static const char *SETTINGS = "PRAGMA page_size=1024; PRAGMA synchronous=FULL; PRAGMA cache_spill=OFF; "
                              "PRAGMA secure_delete=OFF; PRAGMA temp_store=MEMORY; PRAGMA cache_size=4000;";

#define MAX_DBS 64

static char *names[MAX_DBS];
static sqlite3 *conns[MAX_DBS];
static int ndbs;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "driver: %s: %s\n", what, detail);
    exit(1);
}

static int db_index(const char *name)
{
    for (int i = 0; i < ndbs; i++) {
        if (strcmp(names[i], name) == 0) {
            return i;
        }
    }
    if (ndbs == MAX_DBS) {
        die("too many databases", name);
    }
    names[ndbs] = strdup(name);
    return ndbs++;
}

static void exec_or_die(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        die(sql, err ? err : "?");
    }
}

static void set_mode(sqlite3 *db, const char *mode)
{
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", mode);
    exec_or_die(db, sql);
}

static sqlite3 *conn(int d)
{
    if (!conns[d]) {
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
        if (sqlite3_open_v2(names[d], &conns[d], flags, NULL) != SQLITE_OK) {
            die("open", names[d]);
        }
        exec_or_die(conns[d], SETTINGS);
        set_mode(conns[d], "off");
    }
    return conns[d];
}

/* `replay::execute_counted`: each statement prepared, stepped once, finalized; VM steps summed. */
static long long execute_counted(sqlite3 *db, const char *sql)
{
    long long steps = 0;
    const char *rest = sql;
    while (rest && *rest) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, rest, -1, &st, &rest) != SQLITE_OK) {
            die(sql, sqlite3_errmsg(db));
        }
        if (!st) {
            break;
        }
        int rc = sqlite3_step(st);
        steps += sqlite3_stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
            die(sql, sqlite3_errmsg(db));
        }
        sqlite3_finalize(st);
    }
    return steps;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) {
        s[--n] = 0;
    }
}

static int run(const char *mode, const char *trace, const char *dir)
{
    FILE *f = fopen(trace, "r");
    if (!f) {
        die("open trace", trace);
    }
    if (chdir(dir) != 0) {
        die("chdir", dir);
    }
    /* locsim turns SQLite's memory statistics off before SQLite initializes (src/sqlite/vfs.rs). */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    int measured = 0, cur = -1;
    while (fgets(line, (int)cap, f)) {
        if (strlen(line) == cap - 1) {
            die("line too long", trace);
        }
        chomp(line);
        char *s = line;
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        if (!*s || *s == '#') {
            continue;
        }
        if (strncmp(s, "@db ", 4) == 0) {
            cur = db_index(s + 4);
            if (!measured) {
                conn(cur);
            }
            continue;
        }
        if (strcmp(s, "@measure") == 0) {
            /* Every database opened, then switched to the measured mode, in index order. */
            for (int d = 0; d < ndbs; d++) {
                conn(d);
            }
            for (int d = 0; d < ndbs; d++) {
                set_mode(conns[d], mode);
            }
            measured = 1;
            continue;
        }
        if (cur < 0) {
            die("a command before the first @db", s);
        }
        if (!measured) {
            exec_or_die(conn(cur), s);
            continue;
        }
        mark(1);
        long long steps = execute_counted(conns[cur], s);
        mark(2);
        printf("%lld\n", steps);
    }
    for (int d = 0; d < ndbs; d++) {
        sqlite3_close(conns[d]);
    }
    fclose(f);
    return 0;
}

/* A loop of `n` iterations of two instructions (subs, bne): 2n instructions. */
static inline __attribute__((always_inline)) void spin(unsigned n)
{
    __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b\n" : "+r"(n) : : "cc");
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "run") == 0 && (!strcmp(argv[2], "delete") || !strcmp(argv[2], "off"))) {
        return run(argv[2], argv[3], argv[4]);
    }
    if (argc == 2 && strcmp(argv[1], "selftest") == 0) {
        /* Regions: empty; 1 000 iterations; 1 000 000 iterations. The counts are loaded from
         * memory before each region, so the two loops differ in their iterations only. */
        static volatile unsigned counts[2] = {1000, 1000000};
        unsigned a = counts[0], b = counts[1];
        mark(1);
        mark(2);
        mark(1);
        spin(a);
        mark(2);
        mark(1);
        spin(b);
        mark(2);
        printf("regions: empty (c), spin(1000) = 2000 + c, spin(1000000) = 2000000 + c\n");
        return 0;
    }
    fprintf(stderr, "usage: driver run delete|off TRACE DIR | driver selftest\n");
    return 2;
}
