//! Number formatting for tables: thousands separators, sensible decimals.

/// `v` with `dec` decimals and a thin-space thousands separator.
pub fn fixed(v: f64, dec: usize) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let s = format!("{:.dec$}", v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i.to_string(), Some(f.to_string())),
        None => (s.clone(), None),
    };
    let mut grouped = String::new();
    let n = int.len();
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (n - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    let neg = v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0');
    format!(
        "{}{}{}",
        if neg { "-" } else { "" },
        grouped,
        frac.map(|f| format!(".{f}")).unwrap_or_default()
    )
}

/// A number with decimals chosen by magnitude (3 significant digits or more).
pub fn num(v: f64) -> String {
    let a = v.abs();
    let dec = if a == 0.0 || a >= 1000.0 {
        0
    } else if a >= 100.0 {
        1
    } else if a >= 1.0 {
        2
    } else if a >= 0.1 {
        3
    } else {
        4
    };
    fixed(v, dec)
}

/// A short number: up to 3 decimals, trailing zeros removed (limits, targets).
pub fn short(v: f64) -> String {
    let s = fixed(v, 3);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Milliseconds for latency columns.
pub fn ms(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 { fixed(v, 1) } else { fixed(v, 3) }
}

/// Seconds as `1h 02m 03s` / `2m 05s` / `12.3 s`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "–".into();
    }
    if s < 60.0 {
        return format!("{s:.1} s");
    }
    let t = s.round() as u64;
    let (h, m, sec) = (t / 3600, (t % 3600) / 60, t % 60);
    if h > 0 {
        format!("{h}h {m:02}m {sec:02}s")
    } else {
        format!("{m}m {sec:02}s")
    }
}

/// Bytes in binary units.
pub fn bytes(b: f64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} {}", U[i])
    } else {
        format!("{v:.1} {}", U[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fixed(1234567.891, 2), "1,234,567.89");
        assert_eq!(fixed(-1234.5, 1), "-1,234.5");
        assert_eq!(fixed(-0.0001, 2), "0.00");
        assert_eq!(num(11130.44), "11,130");
        assert_eq!(num(0.523), "0.523");
        assert_eq!(ms(0.5234), "0.523");
        assert_eq!(duration(3723.0), "1h 02m 03s");
        assert_eq!(duration(12.34), "12.3 s");
        assert_eq!(bytes(805306368.0), "768.0 MiB");
        assert_eq!(short(20.0), "20");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(1000000.0), "1,000,000");
    }
}
