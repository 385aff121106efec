/* bpe.h — GPT-2's byte-level BPE tokenizer: loads encoder.json + vocab.bpe, encodes UTF-8
   text (or any bytes) to token ids and decodes ids back to bytes. Library-independent C.

   WHAT IT COMPUTES
   For valid UTF-8 text the ids are those of tiktoken's GPT-2 encoding built from the same
   two files (tests/gpt2/test_tokenizer.py checks this on over a thousand strings):
     1. With |allow_special|, each literal "<|endoftext|>" becomes the EOT id (50256 in
        GPT-2's files; in another vocabulary the id encoder.json gives that string) and the
        text between them is encoded on its own, as tiktoken's encode(allowed_special="all").
        Without it the string is ordinary text (tiktoken's encode_ordinary).
     2. Pre-tokenization splits text with GPT-2's pattern, the one tiktoken's "gpt2"
        encoding uses:
            '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
        where \s is Unicode White_Space, as in the Rust regex crate tiktoken runs.
     3. Each piece's bytes start as one-byte tokens and are merged pair by pair, lowest
        vocab.bpe rank first (leftmost first among equal pairs), until no adjacent pair is a
        merge; the result maps to ids through encoder.json.

   INVALID UTF-8
   Input is bytes, and bytes that are not part of a well-formed UTF-8 sequence (stray
   continuation bytes, truncated or overlong sequences, surrogates, values past U+10FFFF)
   cannot be given to tiktoken as text. The rule here:
       the input is cut into maximal runs of valid UTF-8 and single invalid bytes; each
       valid run is encoded by steps 2-3 as if it were the whole text, and each invalid byte
       becomes its own piece, i.e. the id of its one-byte token.
   So nothing is lost: decode(encode(x)) == x for every byte string x, and the pattern never
   matches across an invalid byte. The test checks it against tiktoken run per valid run
   plus tiktoken's own one-byte tokens, and that tiktoken's decode of the ids (with
   errors="replace") equals Python's bytes.decode("utf-8", "replace") of x. tiktoken's
   private Encoding._encode_bytes is not the reference: it BPEs the last valid piece together
   with every byte after the first invalid one, which its own source notes "may not be
   correct"; see tests/gpt2/test_tokenizer.py.

   OWNERSHIP AND THREADS
   A gpt2_bpe is made by gpt2_bpe_load and freed by gpt2_bpe_free. Encoding keeps a cache of
   piece -> ids and scratch buffers inside it, so one gpt2_bpe must not encode on two
   threads at once; decoding and the accessors only read and may run concurrently. Arrays
   handed out by encode/decode are malloc'd and freed by the caller with free(). */
#ifndef GPT2_BPE_H
#define GPT2_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2_err.h"

typedef struct gpt2_bpe gpt2_bpe;

/* Loads the vocabulary from |encoder_json| (a JSON object: token string -> id, the token
   strings written in GPT-2's byte-to-unicode alphabet) and |vocab_bpe| (a "#version" line,
   then one merge "A B" per line, in rank order). Checks that the ids are 0..N-1 without
   gaps or repeats, that every byte has its one-byte token, and that both halves and the
   result of every merge are in encoder.json. *out is NULL on failure. */
int gpt2_bpe_load(const char *encoder_json, const char *vocab_bpe, gpt2_bpe **out,
                  gpt2_err *err);
void gpt2_bpe_free(gpt2_bpe *bpe);

/* Number of ids (encoder.json entries), and the EOT id (-1 if encoder.json has no
   "<|endoftext|>"). */
int gpt2_bpe_vocab_size(const gpt2_bpe *bpe);
int gpt2_bpe_eot(const gpt2_bpe *bpe);

typedef struct gpt2_bpe_encode_opts {
  int allow_special; /* nonzero: "<|endoftext|>" in the text becomes the EOT id (default 0) */
} gpt2_bpe_encode_opts;
void gpt2_bpe_encode_opts_init(gpt2_bpe_encode_opts *o);

/* Encodes |len| bytes at |text| (any bytes; see INVALID UTF-8). On success *ids is a
   malloc'd array of *n ids (NULL when *n == 0), freed by the caller; |opts| may be NULL for
   the defaults. Fails only on memory exhaustion or a regex engine error. */
int gpt2_bpe_encode(gpt2_bpe *bpe, const char *text, size_t len,
                    const gpt2_bpe_encode_opts *opts, int32_t **ids, size_t *n,
                    gpt2_err *err);

/* Decodes |n| ids to bytes: *text is malloc'd, *len bytes plus a terminating NUL (the bytes
   may hold NULs or invalid UTF-8: a token can be part of a character). Fails on an id
   outside 0..vocab_size-1. */
int gpt2_bpe_decode(const gpt2_bpe *bpe, const int32_t *ids, size_t n, char **text,
                    size_t *len, gpt2_err *err);

/* The bytes of token |id| (pointer into |bpe|, valid until gpt2_bpe_free; not
   NUL-terminated) and their count in *len; NULL for an id out of range. For streaming
   output one token at a time. */
const char *gpt2_bpe_token(const gpt2_bpe *bpe, int32_t id, size_t *len);

#endif
