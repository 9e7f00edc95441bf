//! Proves sed and awk programs read-only: a strict parser for the sed commands that only print,
//! and a conservative token screen for awk. Anything not understood is refused.

use thiserror::Error;

/// Why a sed or awk program is not proven read-only; the text is the decision's reason.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum ProgramRefused {
    #[error("sed: unterminated address")]
    UnterminatedAddress,
    #[error("sed: unterminated regular expression")]
    UnterminatedRegex,
    #[error("sed: newline inside a regular expression")]
    NewlineInRegex,
    #[error("sed: unexpected `{0}` after a command")]
    Unexpected(char),
    #[error("sed: an address without a command")]
    AddressWithoutCommand,
    #[error("sed: unterminated `y`")]
    UnterminatedY,
    #[error("sed `w` writes to a file")]
    SedWrites,
    #[error("sed `r` reads another file")]
    SedReads,
    #[error("sed `e` runs a command")]
    SedRuns,
    #[error("sed command `{0}` is not known to be read-only")]
    SedCommand(char),
    #[error("sed: bad `s` delimiter")]
    BadDelimiter,
    #[error("sed `s///w` writes to a file")]
    SubstituteWrites,
    #[error("sed `s///e` runs the result as a command")]
    SubstituteRuns,
    #[error("awk pipes run commands")]
    AwkPipe,
    #[error("awk `>` may write to a file")]
    AwkRedirect,
    #[error("awk `{0}` is not allowed without asking")]
    AwkWord(&'static str),
}

/// Checks a sed script; `Err` names the first command that could write, read or execute.
pub(crate) fn check_sed_script(script: &str) -> Result<(), ProgramRefused> {
    let chars: Vec<char> = script.chars().collect();
    let mut p = SedParser { c: &chars, i: 0 };
    p.script()
}

struct SedParser<'a> {
    c: &'a [char],
    i: usize,
}

impl SedParser<'_> {
    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let ch = self.peek();
        self.i += 1;
        ch
    }

    fn skip_blank(&mut self) {
        while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
            self.i += 1;
        }
    }

    fn script(&mut self) -> Result<(), ProgramRefused> {
        loop {
            while self.peek().is_some_and(|c| c.is_whitespace() || c == ';') {
                self.i += 1;
            }
            if self.peek().is_none() {
                return Ok(());
            }
            self.address()?;
            self.skip_blank();
            if self.peek() == Some(',') {
                self.i += 1;
                self.skip_blank();
                self.address()?;
            }
            self.skip_blank();
            while self.peek() == Some('!') {
                self.i += 1;
                self.skip_blank();
            }
            self.command()?;
        }
    }

    fn address(&mut self) -> Result<(), ProgramRefused> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() || c == '+' || c == '~' => {
                self.i += 1;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '~') {
                    self.i += 1;
                }
            }
            Some('$') => self.i += 1,
            Some('/') => {
                self.i += 1;
                self.delimited('/')?;
                self.regex_flags();
            }
            Some('\\') => {
                self.i += 1;
                let delim = self.bump().ok_or(ProgramRefused::UnterminatedAddress)?;
                self.delimited(delim)?;
                self.regex_flags();
            }
            _ => {}
        }
        Ok(())
    }

    fn regex_flags(&mut self) {
        while self.peek().is_some_and(|c| c == 'I' || c == 'M') {
            self.i += 1;
        }
    }

    /// Consumes up to and including the next unescaped `delim`.
    fn delimited(&mut self, delim: char) -> Result<(), ProgramRefused> {
        loop {
            match self.bump() {
                None => return Err(ProgramRefused::UnterminatedRegex),
                Some('\\') => {
                    self.bump();
                }
                Some(c) if c == delim => return Ok(()),
                Some('\n') if delim != '\n' => {
                    return Err(ProgramRefused::NewlineInRegex);
                }
                Some(_) => {}
            }
        }
    }

    fn rest_of_line(&mut self) {
        while let Some(c) = self.bump() {
            if c == '\n' {
                return;
            }
            if c == '\\' {
                self.bump();
            }
        }
    }

    fn label(&mut self) {
        while self
            .peek()
            .is_some_and(|c| c != '\n' && c != ';' && c != '}')
        {
            self.i += 1;
        }
    }

    fn end_of_command(&mut self) -> Result<(), ProgramRefused> {
        self.skip_blank();
        match self.peek() {
            None | Some(';') | Some('\n') | Some('}') | Some('#') => Ok(()),
            Some(c) => Err(ProgramRefused::Unexpected(c)),
        }
    }

    fn command(&mut self) -> Result<(), ProgramRefused> {
        let Some(cmd) = self.bump() else {
            return Err(ProgramRefused::AddressWithoutCommand);
        };
        match cmd {
            '{' | '}' => Ok(()),
            '#' => {
                self.rest_of_line();
                Ok(())
            }
            ':' | 'b' | 't' | 'T' => {
                self.skip_blank();
                self.label();
                Ok(())
            }
            'p' | 'P' | 'd' | 'D' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | '=' | 'z' | 'F' => {
                self.end_of_command()
            }
            'q' | 'Q' | 'l' | 'L' => {
                self.skip_blank();
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.i += 1;
                }
                self.end_of_command()
            }
            'a' | 'i' | 'c' => {
                // Text to print: the rest of the line, with backslash-newline continuations.
                self.rest_of_line();
                Ok(())
            }
            's' => self.substitute(),
            'y' => {
                let delim = self.bump().ok_or(ProgramRefused::UnterminatedY)?;
                self.delimited(delim)?;
                self.delimited(delim)?;
                self.end_of_command()
            }
            'w' | 'W' => Err(ProgramRefused::SedWrites),
            'r' | 'R' => Err(ProgramRefused::SedReads),
            'e' => Err(ProgramRefused::SedRuns),
            other => Err(ProgramRefused::SedCommand(other)),
        }
    }

    fn substitute(&mut self) -> Result<(), ProgramRefused> {
        let delim = match self.bump() {
            Some(d) if d != '\n' && d != '\\' => d,
            _ => return Err(ProgramRefused::BadDelimiter),
        };
        self.delimited(delim)?;
        self.delimited(delim)?;
        while let Some(f) = self.peek() {
            match f {
                'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => self.i += 1,
                'w' => return Err(ProgramRefused::SubstituteWrites),
                'e' => return Err(ProgramRefused::SubstituteRuns),
                _ => break,
            }
        }
        self.end_of_command()
    }
}

/// Refuses awk programs that could run commands, write or read other files: `system`, pipes,
/// output redirection, `getline`, gawk directives. Comparisons with `>` are refused too; that
/// is the price of not parsing awk.
pub(crate) fn check_awk_program(program: &str) -> Result<(), ProgramRefused> {
    if program.contains('|') {
        return Err(ProgramRefused::AwkPipe);
    }
    if program.contains('>') {
        return Err(ProgramRefused::AwkRedirect);
    }
    for word in ["system", "getline", "@", "ENVIRON", "PROCINFO"] {
        if program.contains(word) {
            return Err(ProgramRefused::AwkWord(word));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_only_scripts_pass() {
        for s in [
            "1p",
            "1,5p",
            "$p",
            "/foo/p",
            "/a/,/b/{p;q}",
            "s/a/b/g",
            "s|a|b|2p",
            "y/abc/xyz/",
            "10q",
            "/x/!d",
            "1~2p",
            r"\,x,p",
            "s/\\//x/",
            "=",
            "a hello",
        ] {
            assert_eq!(check_sed_script(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn writing_reading_and_executing_scripts_fail() {
        for s in [
            "w out",
            "1w out",
            "s/a/b/w out",
            "s/a/b/e",
            "e ls",
            "r /etc/passwd",
            "W x",
            "s/a/b/gw x",
            "p;w x",
            "1!e",
            "s/a/b/ w x",
        ] {
            assert!(check_sed_script(s).is_err(), "{s}");
        }
    }

    #[test]
    fn awk_screen() {
        assert!(check_awk_program("{print $1}").is_ok());
        assert!(check_awk_program("NR==1{print}").is_ok());
        assert!(check_awk_program("{system(\"rm x\")}").is_err());
        assert!(check_awk_program("{print > \"f\"}").is_err());
        assert!(check_awk_program("{print | \"sh\"}").is_err());
        assert!(check_awk_program("{\"date\" | getline d}").is_err());
    }
}
