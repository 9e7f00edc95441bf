//! The GitHub Action and example workflows, checked for structure: every input, output and
//! step they reference exists.
