//! Parallel pipes (see the issue).
