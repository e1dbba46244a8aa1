//! Optimizer hints (`/*+ ... */`) in the normalised text: part of the statement, normalised.

use super::super::lexer::{Lexer, Token};
use super::super::write::push_token;
use super::Normaliser;

impl Normaliser<'_> {
    /// Writes an optimizer hint as `/*+ ... */` with its own tokens normalised: it changes the
    /// plan, so it is part of the statement, and a literal in it is still a literal. It is not a
    /// token the list and clause trackers see: hints stand right after the verb.
    pub(super) fn hint(&mut self, body: &[u8]) {
        if self.separator {
            self.out.extend_from_slice(b"; ");
            self.separator = false;
        }
        self.empty = false;
        if !self.out.is_empty() && !matches!(self.out.last(), Some(b'(' | b' ')) {
            self.out.push(b' ');
        }
        self.out.extend_from_slice(b"/*+");
        let mut space = true;
        let at = (body.as_ptr() as usize).wrapping_sub(self.input);
        let mut lexer = Lexer::new(body, self.mode);
        loop {
            let from = at + lexer.pos();
            let Some(mut token) = lexer.next() else { break };
            if self.mask.is_some_and(|m| m.hides(from, at + lexer.pos())) && token != Token::Space {
                token = Token::Placeholder;
            }
            let tight = matches!(token, Token::Punct(b',' | b')'));
            let minus_minus = matches!(token, Token::Punct(b'-')) && self.out.ends_with(b"-");
            let visible = !matches!(token, Token::Space | Token::Comment(_) | Token::Hint(_));
            if visible && ((space && !tight && !self.out.ends_with(b"(")) || minus_minus) {
                self.out.push(b' ');
            }
            space &= !visible;
            match token {
                Token::Space | Token::Comment(_) | Token::Hint(_) => space = true,
                Token::Semicolon => self.out.push(b';'),
                _ => space = push_token(self.out, &token),
            }
        }
        self.out.extend_from_slice(b" */");
        // The next token is always spaced off, so the text normalises to itself.
        self.space = true;
    }
}
