//! beanstalkd's commands, read off one command line the way beanstalkd 1.12
//! reads them (`doc/protocol.txt`, and `prot.c` where the text is silent):
//! a command is known by its prefix, numbers are unsigned decimals that may
//! follow extra spaces, nothing may trail a command's last argument, and a
//! tube's name is 1 to 200 of `A-Z a-z 0-9 - + / ; . $ _ ( )`, not starting
//! with `-`. Pure: the differential tests and the fuzz tests drive it.

/// Longest command line, `\r\n` included (beanstalkd's `LINE_BUF_SIZE`).
pub(crate) const LINE_BYTES_MAX: usize = 224;
/// Longest tube name (beanstalkd's `MAX_TUBE_NAME_LEN - 1`).
pub const TUBE_NAME_BYTES_MAX: usize = 200;

/// One command, its arguments read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `put <pri> <delay> <ttr> <bytes>`, the body to follow.
    Put {
        priority: u32,
        delay_s: u32,
        ttr_s: u32,
        bytes: u32,
    },
    /// `put` of a body larger than allowed: its bytes are skipped.
    PutTooBig {
        bytes: u32,
    },
    Use(String),
    Reserve,
    /// `reserve-with-timeout <seconds>`: a negative timeout waits for ever,
    /// as in beanstalkd.
    ReserveWithTimeout(i64),
    ReserveJob(u64),
    Delete(u64),
    Release {
        id: u64,
        priority: u32,
        delay_s: u32,
    },
    Bury {
        id: u64,
        priority: u32,
    },
    Touch(u64),
    Watch(String),
    Ignore(String),
    Peek(u64),
    PeekReady,
    PeekDelayed,
    PeekBuried,
    Kick(u32),
    KickJob(u64),
    StatsJob(u64),
    StatsTube(String),
    Stats,
    ListTubes,
    ListTubeUsed,
    ListTubesWatched,
    PauseTube {
        tube: String,
        delay_s: u32,
    },
    Quit,
}

/// Why a line is not a command: beanstalkd's two replies for that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    BadFormat,
    UnknownCommand,
}

/// Reads one command line, without its `\r\n`. `job_bytes_max` is the
/// largest body a `put` may announce.
pub fn parse(line: &[u8], job_bytes_max: usize) -> Result<Command, Refusal> {
    use Refusal::BadFormat;
    // A NUL inside the line: beanstalkd's check "for possible maliciousness".
    if line.contains(&0) {
        return Err(BadFormat);
    }
    let Ok(line) = std::str::from_utf8(line) else {
        // Not text: it starts with no command, or has a bad argument.
        return Err(if COMMANDS.iter().any(|(prefix, _)| line.starts_with(prefix.as_bytes())) {
            BadFormat
        } else {
            Refusal::UnknownCommand
        });
    };
    let Some(&(prefix, op)) = COMMANDS.iter().find(|(prefix, _)| line.starts_with(prefix)) else {
        return Err(Refusal::UnknownCommand);
    };
    let args = &line[prefix.len()..];
    // Commands without arguments allow nothing after them.
    let bare = |command: Command| if args.is_empty() { Ok(command) } else { Err(BadFormat) };
    match op {
        Op::Put => {
            let (priority, rest) = number(args)?;
            let (delay_s, rest) = number(rest)?;
            let (ttr_s, rest) = number(rest)?;
            let (bytes, rest) = number::<u32>(rest)?;
            // Too big is answered before trailing garbage, as beanstalkd does.
            if bytes as usize > job_bytes_max {
                return Ok(Command::PutTooBig { bytes });
            }
            if !rest.is_empty() {
                return Err(BadFormat);
            }
            Ok(Command::Put { priority, delay_s, ttr_s, bytes })
        }
        Op::Peek => Ok(Command::Peek(only(args)?)),
        Op::PeekReady => bare(Command::PeekReady),
        Op::PeekDelayed => bare(Command::PeekDelayed),
        Op::PeekBuried => bare(Command::PeekBuried),
        Op::ReserveWithTimeout => Ok(Command::ReserveWithTimeout(strtol(args)?)),
        Op::ReserveJob => Ok(Command::ReserveJob(only(args)?)),
        Op::Reserve => bare(Command::Reserve),
        Op::Delete => Ok(Command::Delete(only(args)?)),
        Op::Release => {
            let (id, rest) = number(args)?;
            let (priority, rest) = number(rest)?;
            Ok(Command::Release { id, priority, delay_s: only(rest)? })
        }
        Op::Bury => {
            let (id, rest) = number(args)?;
            Ok(Command::Bury { id, priority: only(rest)? })
        }
        Op::Kick => Ok(Command::Kick(strtoul(args)?)),
        Op::KickJob => Ok(Command::KickJob(only(args)?)),
        Op::Touch => Ok(Command::Touch(only(args)?)),
        Op::StatsJob => Ok(Command::StatsJob(only(args)?)),
        Op::StatsTube => Ok(Command::StatsTube(tube(args)?)),
        Op::Stats => bare(Command::Stats),
        Op::Use => Ok(Command::Use(tube(args)?)),
        Op::Watch => Ok(Command::Watch(tube(args)?)),
        Op::Ignore => Ok(Command::Ignore(tube(args)?)),
        Op::ListTubesWatched => bare(Command::ListTubesWatched),
        Op::ListTubeUsed => bare(Command::ListTubeUsed),
        Op::ListTubes => bare(Command::ListTubes),
        Op::Quit => Ok(Command::Quit),
        Op::PauseTube => {
            let name = args.trim_start_matches(' ');
            let end = name.find(|c: char| !is_name_char(c)).unwrap_or(name.len());
            if end == 0 {
                return Err(BadFormat);
            }
            let delay_s = only(&name[end..])?;
            Ok(Command::PauseTube { tube: tube(&name[..end])?, delay_s })
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Put,
    Peek,
    PeekReady,
    PeekDelayed,
    PeekBuried,
    ReserveWithTimeout,
    ReserveJob,
    Reserve,
    Delete,
    Release,
    Bury,
    Kick,
    KickJob,
    Touch,
    StatsJob,
    StatsTube,
    Stats,
    Use,
    Watch,
    Ignore,
    ListTubesWatched,
    ListTubeUsed,
    ListTubes,
    Quit,
    PauseTube,
}

/// Prefixes in the order beanstalkd tries them: the first that starts the
/// line names the command (so `reserve-job 1` is not `reserve`).
const COMMANDS: [(&str, Op); 25] = [
    ("put ", Op::Put),
    ("peek ", Op::Peek),
    ("peek-ready", Op::PeekReady),
    ("peek-delayed", Op::PeekDelayed),
    ("peek-buried", Op::PeekBuried),
    ("reserve-with-timeout ", Op::ReserveWithTimeout),
    ("reserve-job ", Op::ReserveJob),
    ("reserve", Op::Reserve),
    ("delete ", Op::Delete),
    ("release ", Op::Release),
    ("bury ", Op::Bury),
    ("kick ", Op::Kick),
    ("kick-job ", Op::KickJob),
    ("touch ", Op::Touch),
    ("stats-job ", Op::StatsJob),
    ("stats-tube ", Op::StatsTube),
    ("stats", Op::Stats),
    ("use ", Op::Use),
    ("watch ", Op::Watch),
    ("ignore ", Op::Ignore),
    ("list-tubes-watched", Op::ListTubesWatched),
    ("list-tube-used", Op::ListTubeUsed),
    ("list-tubes", Op::ListTubes),
    ("quit", Op::Quit),
    ("pause-tube", Op::PauseTube),
];

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-+/;.$_()".contains(c)
}

/// A tube's name, the whole of `text`.
fn tube(text: &str) -> Result<String, Refusal> {
    let valid =
        (1..=TUBE_NAME_BYTES_MAX).contains(&text.len()) && text.chars().all(is_name_char) && !text.starts_with('-');
    if valid {
        Ok(text.to_owned())
    } else {
        Err(Refusal::BadFormat)
    }
}

/// An unsigned decimal after any spaces, and what follows it.
fn number<T: TryFrom<u64>>(text: &str) -> Result<(T, &str), Refusal> {
    let text = text.trim_start_matches(' ');
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let value: u64 = text[..end].parse().map_err(|_| Refusal::BadFormat)?;
    Ok((T::try_from(value).map_err(|_| Refusal::BadFormat)?, &text[end..]))
}

/// An unsigned decimal that is all that is left.
fn only<T: TryFrom<u64>>(text: &str) -> Result<T, Refusal> {
    match number(text)? {
        (value, "") => Ok(value),
        _ => Err(Refusal::BadFormat),
    }
}

/// C's `strtol` as `reserve-with-timeout` reads its argument: spaces, a
/// sign, digits; what trails is ignored, no digits at all read as 0, and
/// only overflow is refused.
fn strtol(text: &str) -> Result<i64, Refusal> {
    let text = text.trim_start_matches([' ', '\t']);
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    if end == 0 {
        return Ok(0);
    }
    let value: i64 = digits[..end].parse().map_err(|_| Refusal::BadFormat)?;
    Ok(if negative { -value } else { value })
}

/// C's `strtoul` as `kick` reads its bound: at least one digit; what trails
/// is ignored; a bound past 32 bits is refused.
fn strtoul(text: &str) -> Result<u32, Refusal> {
    let text = text.trim_start_matches([' ', '\t']);
    let end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if end == 0 {
        return Err(Refusal::BadFormat);
    }
    text[..end].parse().map_err(|_| Refusal::BadFormat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 65_535;

    #[test]
    fn commands_and_their_arguments() {
        assert_eq!(parse(b"put 1 2 3 4", MAX), Ok(Command::Put { priority: 1, delay_s: 2, ttr_s: 3, bytes: 4 }));
        assert_eq!(parse(b"put  1  2 3 4", MAX), Ok(Command::Put { priority: 1, delay_s: 2, ttr_s: 3, bytes: 4 }));
        assert_eq!(parse(b"put 1 2 3 70000 x", MAX), Ok(Command::PutTooBig { bytes: 70_000 }));
        assert_eq!(parse(b"put 1 2 3 4 ", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"put 4294967296 0 1 1", MAX), Err(Refusal::BadFormat), "a priority is 32 bits");
        assert_eq!(parse(b"put -1 0 1 1", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"reserve-job 7", MAX), Ok(Command::ReserveJob(7)));
        assert_eq!(parse(b"reserve", MAX), Ok(Command::Reserve));
        assert_eq!(parse(b"reserve ", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"reserve-with-timeout -1", MAX), Ok(Command::ReserveWithTimeout(-1)));
        assert_eq!(parse(b"reserve-with-timeout 5x", MAX), Ok(Command::ReserveWithTimeout(5)));
        assert_eq!(parse(b"delete +3", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"delete 3 ", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"delete  3", MAX), Ok(Command::Delete(3)));
        assert_eq!(parse(b"release 1 2 3", MAX), Ok(Command::Release { id: 1, priority: 2, delay_s: 3 }));
        assert_eq!(parse(b"kick-job 9", MAX), Ok(Command::KickJob(9)));
        assert_eq!(parse(b"kick 9 and more", MAX), Ok(Command::Kick(9)));
        assert_eq!(parse(b"use a/b;c$d_(e)+f.g", MAX), Ok(Command::Use("a/b;c$d_(e)+f.g".into())));
        assert_eq!(parse(b"use -a", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"use", MAX), Err(Refusal::UnknownCommand));
        assert_eq!(parse(&[b"use ".as_slice(), &[b'a'; 200]].concat(), MAX), Ok(Command::Use("a".repeat(200))));
        assert_eq!(parse(&[b"use ".as_slice(), &[b'a'; 201]].concat(), MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"pause-tube t 5", MAX), Ok(Command::PauseTube { tube: "t".into(), delay_s: 5 }));
        assert_eq!(parse(b"stats-tube", MAX), Err(Refusal::BadFormat), "`stats` with something after it");
        assert_eq!(parse(b"quit now", MAX), Ok(Command::Quit));
        assert_eq!(parse(b"bogus", MAX), Err(Refusal::UnknownCommand));
        assert_eq!(parse(b"peek \0", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"put \xff", MAX), Err(Refusal::BadFormat));
        assert_eq!(parse(b"\xff", MAX), Err(Refusal::UnknownCommand));
    }

    proptest! {
        #[test]
        fn any_bytes_are_a_command_or_a_refusal(line in proptest::collection::vec(any::<u8>(), 0..LINE_BYTES_MAX)) {
            let _ = parse(&line, MAX);
        }

        #[test]
        fn every_put_reads_back(priority: u32, delay_s: u32, ttr_s: u32, bytes in 0u32..=MAX as u32) {
            let line = format!("put {priority} {delay_s} {ttr_s} {bytes}");
            prop_assert_eq!(parse(line.as_bytes(), MAX), Ok(Command::Put { priority, delay_s, ttr_s, bytes }));
        }

        #[test]
        fn every_valid_tube_name_reads_back(name in "[A-Za-z0-9+/;.$_()][A-Za-z0-9+/;.$_()-]{0,199}") {
            prop_assert_eq!(parse(format!("watch {name}").as_bytes(), MAX), Ok(Command::Watch(name)));
        }
    }
}
