//! Messaging load: users, profiles and protocol drivers against real IMAP/SMTP servers (mailbench mail)
