//! Exact rational numbers over `i128`, for checking the arithmetic a step
//! writes (`recompute`). Every operation is checked: a result that does
//! not fit is `None`, never a wrapped or rounded value.

use std::cmp::Ordering;

/// `num / den` in lowest terms, `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rational {
    num: i128,
    den: i128,
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    a = a.abs();
    b = b.abs();
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Rational {
    pub const ZERO: Rational = Rational { num: 0, den: 1 };

    /// `num / den` reduced; `None` for a zero denominator or overflow.
    pub fn new(num: i128, den: i128) -> Option<Rational> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den).max(1);
        let (mut num, mut den) = (num / g, den / g);
        if den < 0 {
            num = num.checked_neg()?;
            den = den.checked_neg()?;
        }
        Some(Rational { num, den })
    }

    pub fn integer(n: i128) -> Rational {
        Rational { num: n, den: 1 }
    }

    pub fn num(self) -> i128 {
        self.num
    }

    pub fn is_integer(self) -> bool {
        self.den == 1
    }

    pub fn add(self, o: Rational) -> Option<Rational> {
        let g = gcd(self.den, o.den).max(1);
        let den = (self.den / g).checked_mul(o.den)?;
        let num = self
            .num
            .checked_mul(o.den / g)?
            .checked_add(o.num.checked_mul(self.den / g)?)?;
        Rational::new(num, den)
    }

    pub fn neg(self) -> Option<Rational> {
        Some(Rational {
            num: self.num.checked_neg()?,
            den: self.den,
        })
    }

    pub fn sub(self, o: Rational) -> Option<Rational> {
        self.add(o.neg()?)
    }

    pub fn mul(self, o: Rational) -> Option<Rational> {
        // Cross-reduce first so products of reduced fractions stay small.
        let g1 = gcd(self.num, o.den).max(1);
        let g2 = gcd(o.num, self.den).max(1);
        Rational::new(
            (self.num / g1).checked_mul(o.num / g2)?,
            (self.den / g2).checked_mul(o.den / g1)?,
        )
    }

    /// `None` for division by zero.
    pub fn div(self, o: Rational) -> Option<Rational> {
        if o.num == 0 {
            return None;
        }
        self.mul(Rational::new(o.den, o.num)?)
    }

    /// `self ^ exp` for a small integer exponent (|exp| <= 64).
    pub fn pow(self, exp: i128) -> Option<Rational> {
        if exp.abs() > 64 {
            return None;
        }
        let mut out = Rational::integer(1);
        for _ in 0..exp.abs() {
            out = out.mul(self)?;
        }
        if exp < 0 {
            Rational::integer(1).div(out)
        } else {
            Some(out)
        }
    }

    /// The nearest multiple of `10^-places` (halves away from zero), and
    /// the one toward zero: the two roundings a written decimal may show.
    pub fn rounded(self, places: u32) -> Option<(Rational, Rational)> {
        let scale = 10i128.checked_pow(places)?;
        let scaled = self.num.checked_mul(scale)?;
        let trunc = scaled / self.den;
        let rem = (scaled % self.den).abs();
        let away = if rem.checked_mul(2)? >= self.den {
            trunc + scaled.signum()
        } else {
            trunc
        };
        Some((Rational::new(away, scale)?, Rational::new(trunc, scale)?))
    }

    /// The integers just below and above (equal for an integer).
    pub fn floor_ceil(self) -> (i128, i128) {
        let f = self.num.div_euclid(self.den);
        (f, if self.is_integer() { f } else { f + 1 })
    }

    /// Written as a terminating decimal when it has one (`10`, `0.125`),
    /// else as `p/q`.
    pub fn to_decimal_string(self) -> String {
        let mut den = self.den;
        let (mut twos, mut fives) = (0u32, 0u32);
        while den % 2 == 0 {
            den /= 2;
            twos += 1;
        }
        while den % 5 == 0 {
            den /= 5;
            fives += 1;
        }
        let places = twos.max(fives);
        let scaled = 10i128
            .checked_pow(places)
            .and_then(|p| self.num.checked_mul(p / self.den));
        match scaled {
            Some(n) if den == 1 => {
                let digits = n.unsigned_abs().to_string();
                let sign = if n < 0 { "-" } else { "" };
                if places == 0 {
                    return format!("{sign}{digits}");
                }
                let digits = format!("{digits:0>width$}", width = places as usize + 1);
                let (int, frac) = digits.split_at(digits.len() - places as usize);
                format!("{sign}{int}.{frac}")
            }
            _ => format!("{}/{}", self.num, self.den),
        }
    }

    pub fn to_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

impl PartialOrd for Rational {
    fn partial_cmp(&self, o: &Rational) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Rational {
    fn cmp(&self, o: &Rational) -> Ordering {
        // Exact when the cross products fit; else by value (far apart then).
        match (self.num.checked_mul(o.den), o.num.checked_mul(self.den)) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.to_f64().total_cmp(&o.to_f64()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(n: i128, d: i128) -> Rational {
        Rational::new(n, d).unwrap()
    }

    #[test]
    fn arithmetic_is_exact_and_reduced() {
        assert_eq!(r(2, 4), r(1, 2));
        assert_eq!(r(1, -3), r(-1, 3));
        assert_eq!(r(1, 3).add(r(1, 6)).unwrap(), r(1, 2));
        assert_eq!(r(1, 5).mul(r(50, 1)).unwrap(), r(10, 1));
        assert_eq!(r(3, 4).div(r(3, 8)).unwrap(), r(2, 1));
        assert_eq!(r(2, 3).pow(-2).unwrap(), r(9, 4));
        assert!(r(1, 2).div(Rational::ZERO).is_none());
        assert!(Rational::new(1, 0).is_none());
        assert!(Rational::integer(i128::MAX).add(r(1, 1)).is_none());
        assert!(r(1, 3) < r(1, 2));
    }

    #[test]
    fn decimal_strings() {
        assert_eq!(r(10, 1).to_decimal_string(), "10");
        assert_eq!(r(1, 8).to_decimal_string(), "0.125");
        assert_eq!(r(-21, 20).to_decimal_string(), "-1.05");
        assert_eq!(r(1, 3).to_decimal_string(), "1/3");
        assert_eq!(r(-7, 6).to_decimal_string(), "-7/6");
    }

    #[test]
    fn roundings_and_floor_ceil() {
        assert_eq!(r(1, 3).rounded(2).unwrap(), (r(33, 100), r(33, 100)));
        assert_eq!(r(2, 3).rounded(2).unwrap(), (r(67, 100), r(66, 100)));
        assert_eq!(r(-2, 3).rounded(1).unwrap(), (r(-7, 10), r(-6, 10)));
        assert_eq!(r(150, 7).floor_ceil(), (21, 22));
        assert_eq!(r(-3, 2).floor_ceil(), (-2, -1));
        assert_eq!(r(4, 1).floor_ceil(), (4, 4));
    }
}
