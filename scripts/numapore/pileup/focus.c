/* The compiled pileup core: one motif's positions in an interval (regions.motif_focus and
 * position_masks for a single motif without --include-bed, and the + strand entries
 * counting_compiled's combined writers take), in C: the Python loops over every hit were a
 * third of a CpG pileup's time (measured with cProfile). Compiled after text.c, into the same
 * module; it uses no other part.
 *
 * The motif comes as two strings of letter sets, forward and reverse complement, one set a
 * motif base (bit 0 A, 1 C, 2 G, 3 T, 4 U), as positions.make_motif's two regexes match them:
 * a letter outside A, C, G, T, U (a soft-masked base kept lower case, an N) matches nothing. */

static uint8_t letter_bit(uint8_t c) {
    switch (c) {
    case 'A': return 1;
    case 'C': return 2;
    case 'G': return 4;
    case 'T': return 8;
    case 'U': return 16;
    default: return 0;
    }
}

/* allowed (2 x length bytes, zeroed: 2 x position + strand set where the motif hits that
 * strand) and want (length bytes, zeroed: either strand) from the hits of seq[0, seqlen)
 * placed at the interval's start (those at length or beyond are dropped); with pos (capacity
 * length), each + strand position in order, its - strand partner in neg (-1 if that position
 * is not a - strand position only, or is outside [0, length); and no entry where the partner
 * falls before the contig's start, when keep_before is 0) and pos_ok 1. Returns the entries. */
int64_t pu_focus(const char *seq, int64_t seqlen, const uint8_t *fwd, const uint8_t *rev,
                 int mlen, int offset, int rev_offset, int64_t start, int64_t length,
                 uint8_t *allowed, uint8_t *want, int64_t *pos, int64_t *neg, uint8_t *pos_ok,
                 int keep_before) {
    uint8_t bits[256];
    for (int i = 0; i < 256; i++) bits[i] = letter_bit((uint8_t)i);
    for (int64_t s = 0; s + mlen <= seqlen; s++) {
        int f = 1, r = 1;
        for (int i = 0; i < mlen && (f || r); i++) {
            uint8_t b = bits[(uint8_t)seq[s + i]];
            f = f && (fwd[i] & b);
            r = r && (rev[i] & b);
        }
        if (f && s + offset < length) {
            allowed[2 * (s + offset)] = 1;
            want[s + offset] = 1;
        }
        if (r && s + rev_offset < length) {
            allowed[2 * (s + rev_offset) + 1] = 1;
            want[s + rev_offset] = 1;
        }
    }
    if (pos == NULL) return 0;
    int64_t n = 0;
    for (int64_t p = 0; p < length; p++) {
        if (!allowed[2 * p]) continue;
        int64_t o = p + rev_offset - offset;
        if (start + o < 0 && !keep_before) continue;
        int only_neg = 0 <= o && o < length && allowed[2 * o + 1] && !allowed[2 * o];
        pos[n] = p;
        neg[n] = only_neg ? o : -1;
        pos_ok[n++] = 1;
    }
    return n;
}
