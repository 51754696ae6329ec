//! Reports (S3): what each machine measures, and the shared record of the
//! reports every machine builds from executed events.
