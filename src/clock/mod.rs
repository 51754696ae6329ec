//! Clock offset estimation and frame pacing (S9), sans-IO.
