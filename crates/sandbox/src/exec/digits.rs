//! Decimal numbers written without allocating, for code that runs where the allocator may
//! not be used: between `fork` and `exec`, and in a keeper that never returns to Rust's
//! runtime.

/// Writes `value` in decimal at the start of `out` and returns how many bytes it took; `out`
/// holds at least ten bytes (`u32::MAX` has ten digits), or the number is cut.
pub(super) fn write_decimal(value: u32, out: &mut [u8]) -> usize {
    let mut digits = [0u8; 10];
    let mut count = 0;
    let mut rest = value;
    loop {
        digits[count] = b'0' + (rest % 10) as u8;
        count += 1;
        rest /= 10;
        if rest == 0 || count == digits.len() {
            break;
        }
    }
    let count = count.min(out.len());
    for (slot, digit) in out.iter_mut().zip(digits[..count].iter().rev()) {
        *slot = *digit;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_width() {
        for value in [0u32, 7, 10, 12_345, u32::MAX] {
            let mut out = [0u8; 12];
            let len = write_decimal(value, &mut out);
            assert_eq!(&out[..len], value.to_string().as_bytes());
        }
    }
}
