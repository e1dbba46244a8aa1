//! rttscope's configuration.
