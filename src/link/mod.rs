//! One peer link (S8), sans-IO: numbering, acknowledgement, resend until
//! acked, validation, and the round-trip estimator.
