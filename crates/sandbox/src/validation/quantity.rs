//! `resource.Quantity` as apimachinery parses and prints it (`k8s.io/apimachinery/pkg/api/
//! resource/quantity.go`, `ParseQuantity` / `parseQuantityString` / `CanonicalizeBytes`): a
//! quantity that does not parse makes the whole body undecodable, so kube-apiserver answers
//! 400, not 422; one that parses is printed in its canonical form in messages.
//!
//! Values are held exactly in nano units (kube rounds anything finer up to 1n), in an `i128`:
//! 1Ei is 1.2e27 nano units, far below its limit.

use std::cmp::Ordering;

/// `quantity.go` `ErrFormatWrong`.
pub const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `quantity.go` `ErrSuffix`.
pub const SUFFIX: &str = "unable to parse quantity's suffix";

/// How a quantity was written, which decides how it is printed (`quantity.go` `Format`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// A parsed quantity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.nanos.cmp(&other.nanos))
    }
}

const NANOS: i128 = 1_000_000_000;

impl Quantity {
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }
}

/// `ParseQuantity`, or its error.
pub fn parse(input: &str) -> Result<Quantity, &'static str> {
    let s = input.trim();
    if s.is_empty() {
        return Err(FORMAT_WRONG);
    }
    let bytes = s.as_bytes();
    let mut pos = 0;
    let negative = bytes[0] == b'-';
    if matches!(bytes[0], b'+' | b'-') {
        pos = 1;
    }
    // The number: digits, then an optional fraction.
    let whole_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let whole = &s[whole_start..pos];
    let mut fraction = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        fraction = &s[start..pos];
    }
    // The suffix: letters of `eEinumkKMGTP`, then an optional signed exponent.
    let suffix_start = pos;
    while pos < bytes.len() && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < bytes.len() && matches!(bytes[pos], b'+' | b'-') {
        pos += 1;
    }
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < bytes.len() {
        return Err(FORMAT_WRONG);
    }
    let (format, base, power) = interpret(&s[suffix_start..]).ok_or(SUFFIX)?;
    // digits × 10^-len(fraction) × base^power, in nano units, rounded up.
    let digits: i128 = format!("{whole}{fraction}")
        .trim_start_matches('0')
        .parse()
        .unwrap_or(0);
    let mut numerator = digits;
    let mut denominator: i128 = 10i128.saturating_pow(fraction.len() as u32);
    let scale = |n: i128, by: i128, times: i32| (0..times).fold(n, |n, _| n.saturating_mul(by));
    if power >= 0 {
        numerator = scale(numerator, base, power);
    } else {
        denominator = scale(denominator, base, -power);
    }
    numerator = numerator.saturating_mul(NANOS);
    let mut nanos = numerator / denominator.max(1);
    if numerator % denominator.max(1) != 0 {
        nanos += 1;
    }
    Ok(Quantity {
        nanos: if negative { -nanos } else { nanos },
        format,
    })
}

/// `quantitySuffixer.interpret`: the format, base and power of a suffix.
fn interpret(suffix: &str) -> Option<(Format, i128, i32)> {
    let binary = |p| Some((Format::BinarySI, 1024, p));
    let decimal = |p| Some((Format::DecimalSI, 10, p));
    match suffix {
        "" => decimal(0),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?.parse::<i32>().ok()?;
            Some((Format::DecimalExponent, 10, exponent))
        }
    }
}

impl std::fmt::Display for Quantity {
    /// `Quantity.String()` (`CanonicalizeBytes`): binary quantities of at least 1024 that are
    /// whole numbers in powers of 1024 (`1Gi`, `1536Mi`), everything else in powers of 1000
    /// with an SI suffix (`500m`, `2`, `1500`) or, when written so, a decimal exponent (`1e3`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let whole = self.nanos % NANOS == 0;
        if self.format == Format::BinarySI && self.nanos.abs() >= 1024 * NANOS && whole {
            let mut amount = self.nanos / NANOS;
            let mut power = 0;
            while amount % 1024 == 0 && power < 6 {
                amount /= 1024;
                power += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
            return write!(f, "{amount}{suffix}");
        }
        // `AsCanonicalBytes`: strip factors of ten, then lower the exponent to a multiple of 3.
        let mut amount = self.nanos;
        let mut exponent: i32 = -9;
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        while exponent.rem_euclid(3) != 0 {
            amount *= 10;
            exponent -= 1;
        }
        if self.format == Format::DecimalExponent {
            return if exponent == 0 {
                write!(f, "{amount}")
            } else {
                write!(f, "{amount}e{exponent}")
            };
        }
        let suffix = match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => return write!(f, "{amount}e{exponent}"),
        };
        write!(f, "{amount}{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(s: &str) -> String {
        parse(s).expect(s).to_string()
    }

    #[test]
    fn parses_as_parse_quantity_does() {
        assert!(parse("500m") < parse("1"));
        assert!(parse("1Gi") > parse("1G"));
        assert_eq!(parse("0.5"), parse("500m"));
        assert_eq!(parse("1e3").map(|q| q.nanos), Ok(1000 * NANOS));
        assert_eq!(parse(" 4 ").map(|q| q.nanos), Ok(4 * NANOS));
        for input in ["lots", "", "1x", "1 Gi"] {
            assert_eq!(parse(input), Err(FORMAT_WRONG), "{input}");
        }
        assert_eq!(parse("1kk"), Err(SUFFIX));
        assert_eq!(parse("1iG"), Err(SUFFIX));
    }

    #[test]
    fn prints_the_canonical_form() {
        for (input, want) in [
            ("2", "2"),
            ("2000m", "2"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1.5k", "1500"),
            ("2000", "2k"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("512Ki", "512Ki"),
            ("1Ki", "1Ki"),
            ("100Mi", "100Mi"),
            ("0.5Ki", "512"),
            ("1e3", "1e3"),
            ("1E6", "1e6"),
            ("0", "0"),
            ("-1", "-1"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
        ] {
            assert_eq!(canonical(input), want, "{input}");
        }
    }
}
