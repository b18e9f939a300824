//! The API server's clock, as the `Date` header of each of its answers
//! shows it against this process's clock (`protocol::clock_offset`).
//!
//! Go's HTTP server dates every answer, the API server's included, to the
//! second. A layer on a client's stack reads it with this clock's time of
//! the sending and of the answer, so a party learns how far its clock is
//! off the server's from requests it makes anyway: no request of its own,
//! whatever fleet size.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::UNIX_EPOCH,
};

use clock::Clock;
use http::{Request, Response, header::DATE};
use protocol::clock_offset::ClockOffset;
use tower::{Layer, Service};

/// The last offset any client carrying this layer saw; clones share it.
#[derive(Clone, Debug)]
pub struct ServerClock {
    clock: Clock,
    last: Arc<Mutex<Option<ClockOffset>>>,
}

impl ServerClock {
    /// Nothing seen yet; times read from `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            last: Arc::new(Mutex::new(None)),
        }
    }

    /// The offset the last dated answer showed (`None`: none seen yet).
    pub fn offset(&self) -> Option<ClockOffset> {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn millis(&self) -> i64 {
        i64::try_from(self.clock.unix_millis()).unwrap_or(i64::MAX)
    }

    /// Keeps what an answer dated `date` (its header's value), sent at
    /// `sent_ms` and answered at `answered_ms`, shows. An answer with no
    /// date, or one that does not parse, shows nothing.
    fn saw(&self, sent_ms: i64, answered_ms: i64, date: Option<&str>) {
        let Some(server_secs) = date.and_then(http_date_secs) else {
            return;
        };
        if let Some(o) = ClockOffset::of_write(sent_ms, answered_ms, server_secs) {
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(o);
        }
    }
}

/// An HTTP date (`Sat, 05 Dec 2026 04:30:00 GMT`) in unix seconds.
fn http_date_secs(date: &str) -> Option<i64> {
    let t = httpdate::parse_http_date(date).ok()?;
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

impl<S> Layer<S> for ServerClock {
    type Service = Dated<S>;

    fn layer(&self, inner: S) -> Dated<S> {
        Dated {
            inner,
            seen: self.clone(),
        }
    }
}

/// A client's service with [`ServerClock`]'s reading of each answer.
#[derive(Clone)]
pub struct Dated<S> {
    inner: S,
    seen: ServerClock,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Dated<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let seen = self.seen.clone();
        let sent_ms = seen.millis();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = answer.await?;
            let date = res.headers().get(DATE).and_then(|v| v.to_str().ok());
            seen.saw(sent_ms, seen.millis(), date);
            Ok(res)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_date_reads_as_unix_seconds_and_anything_else_as_none() {
        assert_eq!(
            http_date_secs("Sat, 05 Dec 2026 04:30:00 GMT"),
            Some(1_796_445_000)
        );
        assert_eq!(http_date_secs("yesterday"), None);
        assert_eq!(http_date_secs(""), None);
    }

    #[test]
    fn each_dated_answer_replaces_the_offset_and_an_undated_one_keeps_it() {
        let clock = Clock::manual(1_796_445_030);
        let seen = ServerClock::new(clock);
        assert_eq!(seen.offset(), None);
        let now = seen.millis();
        // The server says 04:30:00, this clock 04:30:30: 29 to 30 s ahead.
        seen.saw(now, now, Some("Sat, 05 Dec 2026 04:30:00 GMT"));
        assert_eq!(
            seen.offset(),
            Some(ClockOffset {
                above_ms: 29_000,
                at_most_ms: 30_000
            })
        );
        seen.saw(now, now, None);
        seen.saw(now, now, Some("not a date"));
        assert_eq!(seen.offset().map(|o| o.at_most_ms), Some(30_000));
        seen.saw(now, now, Some("Sat, 05 Dec 2026 04:30:30 GMT"));
        assert_eq!(seen.offset().map(|o| o.at_most_ms), Some(0));
    }
}
