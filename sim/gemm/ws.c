/* ws.c - reusable workspace for the packed operands. Each GEMM packs
 * a few arrays of O(mk + kn) words; allocating them fresh every call makes
 * glibc map and unmap them (page faults cost up to a fifth of a 512^3 LUT
 * GEMM), so freed blocks wait in a few global slots for the next call. The
 * slots are taken and returned with atomic exchanges: calls from several
 * threads at once are safe. Cached blocks stay reachable from the slots. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "gemm_internal.h"

#define SLOTS 16

typedef struct ws_block {
    size_t cap;     /* usable bytes after the header */
    max_align_t pad[]; /* data follows, aligned for any type */
} ws_block;

static _Atomic(ws_block *) slots[SLOTS];

void *mts__gemm_ws_alloc(size_t bytes, int zero)
{
    ws_block *b = NULL;
    if (bytes == 0) bytes = 1;
    for (int i = 0; i < SLOTS && !b; i++) {
        ws_block *c = atomic_exchange(&slots[i], NULL);
        if (!c) continue;
        if (c->cap >= bytes) {
            b = c;
            break;
        }
        ws_block *other = atomic_exchange(&slots[i], c); /* too small: put it back */
        if (other) mts__gemm_ws_free(other->pad);        /* a block cached meanwhile */
    }
    if (!b) {
        b = malloc(sizeof *b + bytes);
        if (!b) return NULL;
        b->cap = bytes;
    }
    if (zero) memset(b->pad, 0, bytes);
    return b->pad;
}

void mts__gemm_ws_free(void *p)
{
    if (!p) return;
    ws_block *b = (ws_block *)((char *)p - offsetof(ws_block, pad));
    for (int i = 0; i < SLOTS; i++) { /* an empty slot first */
        ws_block *expect = NULL;
        if (atomic_compare_exchange_strong(&slots[i], &expect, b)) return;
    }
    for (int i = 0; i < SLOTS; i++) { /* all full: evict a smaller block */
        ws_block *old = atomic_exchange(&slots[i], b);
        if (!old) return;
        if (old->cap < b->cap) {
            free(old);
            return;
        }
        b = atomic_exchange(&slots[i], old); /* keep the larger one, carry ours on */
        if (!b) return;
    }
    free(b);
}
