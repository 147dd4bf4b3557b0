/* A program linked with the system SQLite that runs a SQL script on a database whose rollback
 * journal lives in locsim's simulated PCM journal (the pcmjournal extension,
 * docs/your-sqlite-app.md). Nothing in it knows about PCM but the URI it opens.
 *
 *   cargo build --release -p pcmjournal-ext
 *   cc -O2 examples/c/pcm_sqlite_client.c -lsqlite3 -o pcm_client
 *   ./pcm_client target/release/libpcmjournal 'file:app.db?vfs=pcmjournal&pcm_config=RR-S2X' \
 *       examples/sql/notes.sql
 *
 * It prints "statement N" (1-based, flushed) before it runs each statement, and at the end
 * "stats " followed by the JSON of SELECT pcm_journal_stats(). Exit status: 0, 1 if SQLite
 * rejects a statement (named by its number and message), 2 on bad arguments. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s EXTENSION DATABASE_URI SCRIPT\n", argv[0]);
        return 2;
    }
    char *sql = read_file(argv[3]);
    if (!sql) {
        fprintf(stderr, "%s: cannot read\n", argv[3]);
        return 2;
    }
    /* The VFS must exist before the database is opened: load the extension on a scratch
     * connection first (it stays loaded for the process). */
    sqlite3 *scratch, *db;
    char *err = NULL;
    sqlite3_open(":memory:", &scratch);
    sqlite3_db_config(scratch, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, NULL);
    if (sqlite3_load_extension(scratch, argv[1], NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "load %s: %s\n", argv[1], err);
        return 2;
    }
    if (sqlite3_open_v2(argv[2], &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, NULL) != SQLITE_OK) {
        fprintf(stderr, "open %s: %s\n", argv[2], sqlite3_errmsg(db));
        return 2;
    }
    const char *at = sql;
    int n = 0;
    while (*at) {
        sqlite3_stmt *st = NULL;
        const char *tail = NULL;
        if (sqlite3_prepare_v2(db, at, -1, &st, &tail) != SQLITE_OK) {
            fprintf(stderr, "statement %d: %s\n", n + 1, sqlite3_errmsg(db));
            return 1;
        }
        at = tail;
        if (!st) continue; /* only blanks or comments */
        printf("statement %d\n", ++n);
        fflush(stdout);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        }
        if (rc != SQLITE_DONE) {
            fprintf(stderr, "statement %d: %s\n", n, sqlite3_errmsg(db));
            return 1;
        }
        sqlite3_finalize(st);
    }
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT pcm_journal_stats()", -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        fprintf(stderr, "pcm_journal_stats: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    printf("stats %s\n", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    sqlite3_close(scratch);
    free(sql);
    return 0;
}
