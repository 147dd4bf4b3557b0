/* The SQLite side of the pcmjournal extension: every call into SQLite goes through the host's
 * sqlite3_api_routines (sqlite3ext.h), never through a linked SQLite, so the extension works in
 * any process that loads it (the stock sqlite3 shell, a program linked with the system
 * libsqlite3) whatever SQLite the Rust side was built with. The Rust side (src/lib.rs) owns
 * the VFS and the journal model; it calls the helpers below and hands this file its callbacks
 * at load time. */
#include <string.h>
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

typedef sqlite3_vfs *(*make_vfs_fn)(sqlite3_vfs *dflt);
typedef char *(*stats_fn)(const char *db_file); /* JSON, or NULL; freed with free_fn */
typedef void (*free_fn)(char *);

static sqlite3_vfs *pcm_vfs;
static stats_fn rust_stats;
static free_fn rust_free;

/* The connection settings of the journal model (locsim::journal::replay::SETTINGS). */
static const char *settings;

const char *pcmx_uri_parameter(const char *file, const char *param) {
    return sqlite3_uri_parameter(file, param);
}

int pcmx_seed_prng(int x) { return sqlite3_test_control(SQLITE_TESTCTRL_PRNG_SEED, x, (sqlite3 *)0); }

const char *pcmx_libversion(void) { return sqlite3_libversion(); }

/* SELECT pcm_journal_stats(): the figures of the connection's main database, as JSON. */
static void stats(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    (void)argv;
    const char *file = sqlite3_db_filename(sqlite3_context_db_handle(ctx), "main");
    char *json = rust_stats(file ? file : "");
    if (!json) {
        sqlite3_result_error(ctx, "pcm_journal_stats: the main database is not open on the pcmjournal VFS", -1);
        return;
    }
    sqlite3_result_text(ctx, json, -1, SQLITE_TRANSIENT);
    rust_free(json);
}

/* Run on every connection opened after the extension is loaded (and on the loading one): the
 * function, and on connections whose main database is on pcmjournal the settings the journal
 * model needs (docs/your-sqlite-app.md). */
static int connection_init(sqlite3 *db, char **err, const sqlite3_api_routines *api) {
    (void)api;
    int rc = sqlite3_create_function(db, "pcm_journal_stats", 0, SQLITE_UTF8, 0, stats, 0, 0);
    if (rc != SQLITE_OK) return rc;
    sqlite3_vfs *v = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &v) == SQLITE_OK && v == pcm_vfs) {
        return sqlite3_exec(db, settings, 0, 0, err);
    }
    return SQLITE_OK;
}

int pcmx_init(sqlite3 *db, char **err, const sqlite3_api_routines *api, make_vfs_fn make_vfs, stats_fn st,
              free_fn fr, const char *connection_settings) {
    SQLITE_EXTENSION_INIT2(api);
    settings = connection_settings;
    rust_stats = st;
    rust_free = fr;
    if (!pcm_vfs) {
        sqlite3_vfs *dflt = sqlite3_vfs_find(0);
        sqlite3_vfs *v = dflt ? make_vfs(dflt) : 0;
        if (!v) {
            *err = sqlite3_mprintf("pcmjournal: no default VFS to pass database files to");
            return SQLITE_ERROR;
        }
        int rc = sqlite3_vfs_register(v, 0);
        if (rc != SQLITE_OK) return rc;
        pcm_vfs = v;
    }
    int rc = sqlite3_auto_extension((void (*)(void))connection_init);
    if (rc != SQLITE_OK) return rc;
    rc = connection_init(db, err, api);
    /* The VFS lives in this library: it must stay loaded after this connection closes. */
    return rc == SQLITE_OK ? SQLITE_OK_LOAD_PERMANENTLY : rc;
}
