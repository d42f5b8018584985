//! `resource.Quantity` as apimachinery parses it (`k8s.io/apimachinery/pkg/api/resource/
//! quantity.go`, `ParseQuantity` / `parseQuantityString`): a quantity that does not parse makes
//! the whole body undecodable, so kube-apiserver answers 400, not 422.

/// `quantity.go` `ErrFormatWrong`.
pub const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `quantity.go` `ErrSuffix`.
pub const SUFFIX: &str = "unable to parse quantity's suffix";

/// The value of a quantity as a float (close enough to compare requests with limits), or the
/// error `ParseQuantity` returns.
pub fn parse(input: &str) -> Result<f64, &'static str> {
    let s = input.trim();
    if s.is_empty() {
        return Err(FORMAT_WRONG);
    }
    let bytes = s.as_bytes();
    let mut pos = 0;
    if matches!(bytes[0], b'+' | b'-') {
        pos = 1;
    }
    // The number: digits, then an optional fraction.
    let number_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
    }
    let number = &s[..pos];
    let digits = &s[number_start..pos];
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
    let suffix = &s[suffix_start..];
    let multiplier = multiplier(suffix).ok_or(SUFFIX)?;
    if digits.is_empty() || digits == "." {
        // `parseQuantityString` reads an empty number as zero.
        return Ok(0.0);
    }
    let value: f64 = number.parse().map_err(|_| FORMAT_WRONG)?;
    Ok(value * multiplier)
}

/// `quantitySuffixer.interpret`: binary SI, decimal SI, or a decimal exponent.
fn multiplier(suffix: &str) -> Option<f64> {
    let binary = |p: i32| Some(1024f64.powi(p));
    let decimal = |p: i32| Some(10f64.powi(p));
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
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            exponent.parse::<i32>().ok().and_then(decimal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_parse_quantity_does() {
        for (input, want) in [
            ("1", 1.0),
            ("500m", 0.5),
            ("0.5", 0.5),
            ("1Gi", 1073741824.0),
            ("2k", 2000.0),
            ("1e3", 1000.0),
            ("1E-3", 0.001),
            ("+3", 3.0),
            (" 4 ", 4.0),
        ] {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
        for input in ["lots", "", "1x", "1 Gi"] {
            assert_eq!(parse(input), Err(FORMAT_WRONG), "{input}");
        }
        assert_eq!(parse("1kk"), Err(SUFFIX));
        assert_eq!(parse("1iG"), Err(SUFFIX));
    }
}
