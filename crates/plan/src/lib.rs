//! Sizing planner: mailbox profile to IOPS, capacity, disks and copy layout (mailbench plan)
