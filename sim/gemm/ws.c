/* ws.c - reusable workspace for the packed operands. Each GEMM packs
 * a few arrays of O(mk + kn) words; allocating them fresh every call makes
 * glibc map and unmap them (page faults cost up to a fifth of a 512^3 LUT
 * GEMM), so freed blocks wait in a few global slots for the next call. The
 * slots are taken and returned with atomic exchanges: calls from several
 * threads at once are safe. Cached blocks stay reachable from the slots.
 * Blocks start on a 64-byte line: the kernels load whole 64-byte vectors
 * (table rows, packed panels), and a load that straddles two lines costs
 * two (a quarter of the LUT kernel's time on a 1024^3 GEMM when they did). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "gemm_internal.h"

#define SLOTS 16

#define WS_ALIGN 64

typedef struct ws_block {
    size_t cap;                        /* usable bytes after the header */
    _Alignas(WS_ALIGN) unsigned char pad[]; /* data follows, on a cache line */
} ws_block;

static _Atomic(ws_block *) slots[SLOTS];
static _Atomic size_t caps[SLOTS]; /* capacity of the block in slots[i] when it was put there */

void *gemm_ws_alloc(size_t bytes, int zero)
{
    ws_block *b = NULL;
    if (bytes == 0) bytes = 1;
    /* best fit: the smallest cached block that holds bytes, so a small
     * request does not take the block a large one needs next (which would
     * then be malloc'ed and page-faulted in again). caps[] is a hint; the
     * block taken is checked. */
    int best = -1;
    for (int i = 0; i < SLOTS; i++) {
        size_t c = atomic_load(&caps[i]);
        if (c >= bytes && (best < 0 || c < atomic_load(&caps[best]))) best = i;
    }
    if (best >= 0) {
        ws_block *c = atomic_exchange(&slots[best], NULL);
        atomic_store(&caps[best], 0);
        if (c && c->cap >= bytes) b = c;
        else if (c) gemm_ws_free(c->pad); /* changed meanwhile: back into the cache */
    }
    if (!b) {
        size_t total = sizeof *b + bytes;
        if (total < bytes || total > SIZE_MAX - WS_ALIGN) return NULL; /* overflow */
        b = aligned_alloc(WS_ALIGN, (total + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN);
        if (!b) return NULL;
        b->cap = bytes;
    }
    if (zero) memset(b->pad, 0, bytes);
    return b->pad;
}

void gemm_ws_free(void *p)
{
    if (!p) return;
    ws_block *b = (ws_block *)((char *)p - offsetof(ws_block, pad));
    for (int i = 0; i < SLOTS; i++) { /* an empty slot first */
        ws_block *expect = NULL;
        if (atomic_compare_exchange_strong(&slots[i], &expect, b)) {
            atomic_store(&caps[i], b->cap);
            return;
        }
    }
    for (int i = 0; i < SLOTS; i++) { /* all full: evict a smaller block */
        ws_block *old = atomic_exchange(&slots[i], b);
        atomic_store(&caps[i], b->cap);
        if (!old) return;
        if (old->cap < b->cap) {
            free(old);
            return;
        }
        b = atomic_exchange(&slots[i], old); /* keep the larger one, carry ours on */
        atomic_store(&caps[i], old->cap);
        if (!b) return;
    }
    free(b);
}

void *mts_gemm_ws_alloc(size_t bytes) { return gemm_ws_alloc(bytes, 0); }
void mts_gemm_ws_free(void *p) { gemm_ws_free(p); }
