//! The lane order of a vector whose ops are not all of one length: longest first,
//! the ops of each length in vector order. A data path's vector holds a few lengths
//! (WireGuard pads its texts to 16 bytes), so the ops are counted by length and
//! placed, two passes over the vector, instead of sorted: a comparison sort of 256
//! ops took 0.5 to 0.9 us, as much as 6% of a vector of small packets of six lengths.

/// Distinct lengths counted before the order falls back to a sort.
const MAX_LENGTHS: usize = 16;

/// What the counting keeps between calls, so that a steady state allocates nothing.
#[derive(Default)]
pub(crate) struct LengthBuckets {
    /// Each op's length, as its place in the table of lengths seen.
    slot: Vec<u8>,
}

impl LengthBuckets {
    /// Fills `order` with `0..n`, longest first by `len_of`, equal lengths in
    /// ascending order.
    pub fn longest_first(
        &mut self,
        n: usize,
        len_of: impl Fn(usize) -> usize,
        order: &mut Vec<u32>,
    ) {
        let mut lengths = [0usize; MAX_LENGTHS];
        let mut counts = [0u32; MAX_LENGTHS];
        let mut seen = 0;
        let mut last = 0;
        self.slot.clear();
        for i in 0..n {
            let len = len_of(i);
            // Ops of one length often come in a row: the last one's slot first.
            let slot = if seen > 0 && lengths[last] == len {
                last
            } else if let Some(s) = lengths[..seen].iter().position(|&l| l == len) {
                s
            } else if seen < MAX_LENGTHS {
                lengths[seen] = len;
                seen += 1;
                seen - 1
            } else {
                // Too many lengths to count: sorted, the index breaking ties (the
                // same order, and no scratch memory as a stable sort would take).
                order.clear();
                order.extend(0..n as u32);
                order.sort_unstable_by_key(|&i| (core::cmp::Reverse(len_of(i as usize)), i));
                return;
            };
            last = slot;
            counts[slot] += 1;
            self.slot.push(slot as u8);
        }
        // Where each length's ops begin: the lengths themselves sorted, longest first.
        let mut by_length: [usize; MAX_LENGTHS] = core::array::from_fn(|s| s);
        by_length[..seen].sort_unstable_by_key(|&s| core::cmp::Reverse(lengths[s]));
        let mut next = [0u32; MAX_LENGTHS];
        let mut at = 0;
        for &s in &by_length[..seen] {
            next[s] = at;
            at += counts[s];
        }
        order.clear();
        order.resize(n, 0);
        for (i, &s) in self.slot.iter().enumerate() {
            let s = s as usize;
            order[next[s] as usize] = i as u32;
            next[s] += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// What the counting must give: a stable sort, longest first.
    fn sorted(lens: &[usize]) -> Vec<u32> {
        let mut v: Vec<u32> = (0..lens.len() as u32).collect();
        v.sort_by_key(|&i| core::cmp::Reverse(lens[i as usize]));
        v
    }

    #[test]
    fn orders_as_a_stable_sort_longest_first() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut b = LengthBuckets::default();
        let mut order = Vec::new();
        // From one length to more than the table holds (the sort takes over), in
        // vectors of up to 300 ops, some of them empty.
        for distinct in [1usize, 2, 3, 6, 15, 16, 17, 40] {
            for _ in 0..50 {
                let n = rng.gen_range(0..300);
                let pool: Vec<usize> = (0..distinct).map(|_| rng.gen_range(0..9000)).collect();
                let lens: Vec<usize> = (0..n).map(|_| pool[rng.gen_range(0..distinct)]).collect();
                b.longest_first(n, |i| lens[i], &mut order);
                assert_eq!(order, sorted(&lens), "{distinct} lengths, {n} ops");
            }
        }
        // Runs of one length, and a vector already in order.
        let lens = [64, 64, 64, 80, 80, 48, 48, 48, 64];
        b.longest_first(lens.len(), |i| lens[i], &mut order);
        assert_eq!(order, sorted(&lens));
        let lens = [1518, 570, 570, 64];
        b.longest_first(lens.len(), |i| lens[i], &mut order);
        assert_eq!(order, [0, 1, 2, 3]);
    }
}
