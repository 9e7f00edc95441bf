//! A bound on one line of a server's stdout. The SDK reads JSON-RPC messages line by line
//! with no limit of its own, so a server printing endless bytes without a newline would grow
//! the runner's memory until it dies; past the cap the read fails and the session closes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The longest message line a server may send: far above any tool listing or result a model
/// could use (results are cut to the run's limits anyway), far below what hurts the runner.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Passes bytes through unchanged, failing once a line runs past `max` bytes.
pub struct LineCapped<R> {
    inner: R,
    max: usize,
    since_newline: usize,
    overflowed: Arc<AtomicBool>,
}

impl<R> LineCapped<R> {
    pub fn new(inner: R, max: usize) -> Self {
        LineCapped {
            inner,
            max,
            since_newline: 0,
            overflowed: Arc::default(),
        }
    }

    /// Set once the cap was passed: the SDK only sees a closed transport, so whoever
    /// reports the failed call reads the reason here.
    pub fn overflow_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.overflowed)
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineCapped<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let overflow = buf.filled()[before..].iter().any(|&byte| {
                if byte == b'\n' {
                    this.since_newline = 0;
                } else {
                    this.since_newline += 1;
                }
                this.since_newline > this.max
            });
            if overflow {
                this.overflowed.store(true, Ordering::SeqCst);
                // A failed read must hand back no bytes (readers assert it).
                buf.set_filled(before);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the server sent a line longer than {} bytes; its session was closed",
                        this.max
                    ),
                )));
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn read_all(input: &[u8], max: usize) -> io::Result<Vec<u8>> {
        let mut capped = LineCapped::new(input, max);
        let mut out = Vec::new();
        capped.read_to_end(&mut out).await?;
        Ok(out)
    }

    #[tokio::test]
    async fn lines_up_to_the_cap_pass_unchanged_and_a_longer_one_fails() {
        let ok = b"12345\n123\n12345".to_vec();
        assert_eq!(read_all(&ok, 5).await.unwrap(), ok);
        let mut capped = LineCapped::new(&b"12345\n123456\n"[..], 5);
        let flag = capped.overflow_flag();
        let err = capped.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(flag.load(Ordering::SeqCst));
        // The count carries across reads: a long line split over many small reads still fails.
        let long = [b'x'; 100];
        let mut capped = LineCapped::new(&long[..], 64);
        let mut chunk = [0u8; 7];
        let mut failed = false;
        for _ in 0..20 {
            match capped.read(&mut chunk).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(
            failed,
            "a 100-byte line passed a 64-byte cap in small reads"
        );
    }
}
