//! Tokens of the IR script, line by line, with their positions.
//!
//! The script is indentation-structured like Python: each non-blank line
//! keeps its indent (in spaces) and its tokens. `#` starts a comment, except
//! on the header line (`# tile.prim_func consts(..)`), whose `#` is a token.

use super::{ReadError, Res};
use crate::ir::DType;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    /// Digits only; a sign is a separate `-` token.
    Int(String),
    /// A number with a fraction or an exponent (`0.5`, `1e-10`).
    Float(String),
    /// A string literal, escapes resolved.
    Str(String),
    /// An operator or punctuation mark.
    Punct(&'static str),
    /// The `#` opening the header line.
    Hash,
}

impl Tok {
    /// How the token is named in messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(s) | Tok::Float(s) => format!("number `{s}`"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Hash => "`#`".to_string(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    /// 1-based column of the token's first character.
    pub col: usize,
}

#[derive(Debug, Clone)]
pub struct Line {
    /// 1-based line number in the text.
    pub number: usize,
    /// Leading spaces.
    pub indent: usize,
    pub tokens: Vec<Token>,
    /// 1-based column just past the last character.
    pub end_col: usize,
}

/// Operators and punctuation, longest first.
const PUNCTS: [&str; 27] = [
    "<=", ">=", "==", "!=", "&&", "||", "<<", ">>", "(", ")", "[", "]", ",", ";", ":", "=", ".",
    "+", "-", "*", "/", "%", "<", ">", "&", "|", "^",
];

const HEADER: &str = "# tile.prim_func";

/// Splits `text` into lines of tokens, dropping blank and comment-only lines.
pub fn lex(text: &str) -> Result<Vec<Line>, ReadError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let number = i + 1;
        let chars: Vec<char> = raw.chars().collect();
        let indent = chars.iter().take_while(|c| **c == ' ').count();
        if chars.get(indent) == Some(&'\t') {
            return Err(ReadError::new(
                number,
                indent + 1,
                "a tab in the indentation; the script indents by 4 spaces",
            ));
        }
        let tokens = LineLexer {
            chars: &chars,
            at: indent,
            line: number,
        }
        .tokens(raw.starts_with(HEADER))?;
        if !tokens.is_empty() {
            out.push(Line {
                number,
                indent,
                tokens,
                end_col: chars.len() + 1,
            });
        }
    }
    Ok(out)
}

struct LineLexer<'a> {
    chars: &'a [char],
    at: usize,
    line: usize,
}

fn ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn ident_continue(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl LineLexer<'_> {
    fn peek(&self, k: usize) -> Option<char> {
        self.chars.get(self.at + k).copied()
    }

    fn err<T>(&self, col: usize, msg: impl Into<String>) -> Result<T, ReadError> {
        Err(ReadError::new(self.line, col, msg))
    }

    fn tokens(mut self, header: bool) -> Result<Vec<Token>, ReadError> {
        let mut out = Vec::new();
        while let Some(c) = self.peek(0) {
            let col = self.at + 1;
            if c == ' ' {
                self.at += 1;
                continue;
            }
            let tok = if c == '#' {
                if !(header && self.at == 0) {
                    break; // a comment
                }
                self.at += 1;
                Tok::Hash
            } else if ident_start(c) {
                self.ident()
            } else if c.is_ascii_digit() {
                self.number()?
            } else if c == '"' {
                Tok::Str(self.string()?)
            } else {
                let rest: String = self.chars[self.at..].iter().take(2).collect();
                let Some(p) = PUNCTS.iter().find(|p| rest.starts_with(**p)) else {
                    return self.err(col, format!("unexpected character `{c}`"));
                };
                self.at += p.len();
                Tok::Punct(p)
            };
            out.push(Token { tok, col });
        }
        Ok(out)
    }

    fn ident(&mut self) -> Tok {
        let start = self.at;
        // A raw identifier (`r#type`) keeps its prefix, as `syn` spells it.
        if self.peek(0) == Some('r') && self.peek(1) == Some('#') {
            if let Some(c) = self.peek(2) {
                if ident_start(c) {
                    self.at += 2;
                }
            }
        }
        while self.peek(0).is_some_and(ident_continue) {
            self.at += 1;
        }
        Tok::Ident(self.chars[start..self.at].iter().collect())
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.peek(0).is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Result<Tok, ReadError> {
        let start = self.at;
        self.digits();
        let mut float = false;
        if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
            self.digits();
            float = true;
        }
        if matches!(self.peek(0), Some('e' | 'E')) {
            let sign = usize::from(matches!(self.peek(1), Some('+' | '-')));
            if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                self.at += 1 + sign;
                self.digits();
                float = true;
            }
        }
        let text: String = self.chars[start..self.at].iter().collect();
        if self.peek(0).is_some_and(ident_continue) {
            return self.err(start + 1, format!("malformed number `{text}...`"));
        }
        Ok(if float {
            Tok::Float(text)
        } else {
            Tok::Int(text)
        })
    }

    /// A string in Rust's `Debug` spelling (how the printer writes labels).
    fn string(&mut self) -> Result<String, ReadError> {
        let open = self.at + 1;
        self.at += 1;
        let mut s = String::new();
        loop {
            let Some(c) = self.peek(0) else {
                return self.err(open, "unterminated string");
            };
            self.at += 1;
            match c {
                '"' => return Ok(s),
                '\\' => s.push(self.escape()?),
                c => s.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, ReadError> {
        let col = self.at;
        let Some(c) = self.peek(0) else {
            return self.err(col, "unterminated string");
        };
        self.at += 1;
        Ok(match c {
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            '\\' | '"' | '\'' => c,
            'u' if self.peek(0) == Some('{') => {
                let close = self.chars[self.at..].iter().position(|c| *c == '}');
                let hex: Option<String> =
                    close.map(|n| self.chars[self.at + 1..self.at + n].iter().collect());
                let ch = hex
                    .as_deref()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32);
                match (ch, close) {
                    (Some(ch), Some(n)) => {
                        self.at += n + 1;
                        ch
                    }
                    _ => return self.err(col, "malformed `\\u{..}` escape"),
                }
            }
            c => return self.err(col, format!("unknown escape `\\{c}`")),
        })
    }
}

/// The tokens of one line, read left to right.
pub struct Cursor<'a> {
    pub toks: &'a [Token],
    pub i: usize,
    pub line: usize,
    pub end_col: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(l: &'a Line) -> Cursor<'a> {
        Cursor {
            toks: &l.tokens,
            i: 0,
            line: l.number,
            end_col: l.end_col,
        }
    }

    pub fn peek(&self) -> Option<&'a Tok> {
        self.toks.get(self.i).map(|t| &t.tok)
    }

    pub fn peek_at(&self, k: usize) -> Option<&'a Tok> {
        self.toks.get(self.i + k).map(|t| &t.tok)
    }

    pub fn col(&self) -> usize {
        self.toks.get(self.i).map_or(self.end_col, |t| t.col)
    }

    /// An error at the current token.
    pub fn err<T>(&self, msg: impl Into<String>) -> Res<T> {
        Err(ReadError::new(self.line, self.col(), msg))
    }

    /// An error saying what was expected here.
    pub fn expected<T>(&self, what: &str) -> Res<T> {
        let found = match self.peek() {
            Some(t) => t.describe(),
            None => "the end of the line".to_string(),
        };
        self.err(format!("expected {what}, found {found}"))
    }

    pub fn at_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(x)) if *x == p)
    }

    pub fn at_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(x)) if x == s)
    }

    pub fn eat_punct(&mut self, p: &str) -> bool {
        let hit = self.at_punct(p);
        self.i += usize::from(hit);
        hit
    }

    pub fn eat_ident(&mut self, s: &str) -> bool {
        let hit = self.at_ident(s);
        self.i += usize::from(hit);
        hit
    }

    pub fn punct(&mut self, p: &str) -> Res<()> {
        if self.eat_punct(p) {
            Ok(())
        } else {
            self.expected(&format!("`{p}`"))
        }
    }

    pub fn keyword(&mut self, s: &str) -> Res<()> {
        if self.eat_ident(s) {
            Ok(())
        } else {
            self.expected(&format!("`{s}`"))
        }
    }

    /// `T.<name>`: the name after the namespace.
    pub fn t_name(&mut self) -> Res<String> {
        self.keyword("T")?;
        self.punct(".")?;
        self.ident()
    }

    pub fn ident(&mut self) -> Res<String> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                self.i += 1;
                Ok(s.clone())
            }
            _ => self.expected("a name"),
        }
    }

    pub fn string(&mut self) -> Res<String> {
        match self.peek() {
            Some(Tok::Str(s)) => {
                self.i += 1;
                Ok(s.clone())
            }
            _ => self.expected("a string"),
        }
    }

    /// Whether an integer (with an optional `-`) comes next.
    pub fn at_int(&self) -> bool {
        match self.peek() {
            Some(Tok::Punct("-")) => matches!(self.peek_at(1), Some(Tok::Int(_))),
            t => matches!(t, Some(Tok::Int(_))),
        }
    }

    /// An integer with an optional `-`.
    pub fn int(&mut self) -> Res<i64> {
        let neg = self.eat_punct("-");
        match self.peek() {
            Some(Tok::Int(s)) => {
                let v = parse_int(s, neg).map_or_else(|| self.err("integer out of range"), Ok)?;
                self.i += 1;
                Ok(v)
            }
            _ => self.expected("an integer"),
        }
    }

    pub fn boolean(&mut self) -> Res<bool> {
        if self.eat_ident("true") {
            Ok(true)
        } else if self.eat_ident("false") {
            Ok(false)
        } else {
            self.expected("`true` or `false`")
        }
    }

    /// `name=` before a keyword argument.
    pub fn kwarg(&mut self, name: &str) -> Res<()> {
        self.keyword(name)?;
        self.punct("=")
    }

    pub fn dtype(&mut self) -> Res<DType> {
        let at = self.i;
        let name = self.ident()?;
        dtype_named(&name).map_or_else(
            || {
                self.i = at;
                self.expected("a dtype")
            },
            Ok,
        )
    }

    pub fn end(&self) -> Res<()> {
        if self.i < self.toks.len() {
            return self.expected("the end of the line");
        }
        Ok(())
    }
}

/// `digits` as an i64, negated if `neg` (so `i64::MIN` reads).
pub fn parse_int(digits: &str, neg: bool) -> Option<i64> {
    let v: i128 = digits.parse().ok()?;
    i64::try_from(if neg { -v } else { v }).ok()
}

pub fn dtype_named(name: &str) -> Option<DType> {
    use DType::*;
    [
        Bool, I8, U8, I16, U16, I32, U32, I64, U64, F16, BF16, F32, F64, F8E4M3, F8E5M2,
    ]
    .into_iter()
    .find(|t| t.name() == name)
}

/// Skips to just past the `)` closing a group whose `(` was just taken.
pub fn skip_group(c: &mut Cursor) -> Res<()> {
    let mut depth = 1;
    while depth > 0 {
        match c.peek() {
            Some(Tok::Punct("(")) => depth += 1,
            Some(Tok::Punct(")")) => depth -= 1,
            None => return c.expected("`)`"),
            _ => {}
        }
        c.i += 1;
    }
    Ok(())
}
