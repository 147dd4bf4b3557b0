/*
 * A QEMU TCG plugin counting the guest instructions executed between two marker system calls
 * of the program it runs (linux-user mode, one thread): an inline add of one per instruction
 * executed, so a translation block left early counts only what ran.
 *
 * The program marks a region with syscall(MARK, 1) before it and syscall(MARK, 2) after it;
 * each region's count is one line of the output file (argument out=PATH). MARK is a system
 * call number no Linux ABI defines: QEMU answers it with ENOSYS and nothing else happens.
 *
 * Built against QEMU's plugin API version 1 (QEMU 7.2, Debian bookworm's qemu-user), whose
 * few declarations used here are repeated below: Debian ships no qemu-plugin.h.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num,
                                              uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                                              uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op,
                                                void *ptr, uint64_t imm);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

/* Must match the driver's. */
#define MARK 0x7f0f

static uint64_t insns;
static uint64_t start;
static uint64_t regions;
static FILE *out;

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        qemu_plugin_register_vcpu_insn_exec_inline(qemu_plugin_tb_get_insn(tb, i), QEMU_PLUGIN_INLINE_ADD_U64,
                                                   &insns, 1);
    }
}

static void on_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2,
                       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
    if (num != MARK) {
        return;
    }
    if (a1 == 1) {
        start = insns;
    } else if (a1 == 2) {
        fprintf(out, "%" PRIu64 "\n", insns - start);
        regions++;
    }
}

static void on_exit_(qemu_plugin_id_t id, void *p)
{
    fprintf(stderr, "icount: %" PRIu64 " instructions in all, %" PRIu64 " regions\n", insns, regions);
    fclose(out);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0) {
            path = argv[i] + 4;
        }
    }
    if (!path || !(out = fopen(path, "w"))) {
        fprintf(stderr, "icount: give out=PATH, a writable file\n");
        return 1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_vcpu_syscall_cb(id, on_syscall);
    qemu_plugin_register_atexit_cb(id, on_exit_, NULL);
    return 0;
}
