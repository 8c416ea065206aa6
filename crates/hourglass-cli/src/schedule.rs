//! `hourglass schedule put|list|show|pause|resume|delete`.

use std::time::Duration;

use clap::Subcommand;
use hourglass_client::wire::{NewSchedule, SchedulesQuery};

use crate::client::{connect, Explain};
use crate::{millis, payload, print, ServerArgs};

/// What to do with schedules.
#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create or replace a schedule.
    Put {
        /// The schedule's name.
        name: String,
        /// The queue its tasks go to.
        #[arg(long)]
        queue: String,
        /// A cron expression: 5 fields, 6 with seconds first, or @daily and the like.
        #[arg(long, conflicts_with = "every", required_unless_present = "every")]
        cron: Option<String>,
        /// The time zone the cron expression is read in (IANA name).
        #[arg(long = "tz", default_value = "UTC", requires = "cron")]
        time_zone: String,
        /// A fixed period instead of a cron expression.
        #[arg(long, value_parser = humantime::parse_duration)]
        every: Option<Duration>,
        /// The payload of every task, as JSON.
        #[arg(long, default_value = "null")]
        payload: String,
        /// Occurrences missed while the server was down: skip, once or all.
        #[arg(long, default_value = "skip")]
        misfire: String,
        /// An occurrence while the previous task is alive: allow or forbid.
        #[arg(long, default_value = "allow")]
        overlap: String,
        /// Deliveries allowed for each task.
        #[arg(long)]
        max_attempts: Option<u32>,
        /// A deadline for each run: not started within this long of its
        /// time, it is skipped (or its task dies, reason `expired`).
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<Duration>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the schedules with their next runs.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a schedule and its next five runs.
    Show {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Pause a schedule: it enqueues nothing until resumed.
    Pause {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Resume a paused schedule; what it missed goes to its misfire policy.
    Resume {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Delete a schedule (tasks it enqueued stay).
    Delete {
        /// The schedule's name.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Runs `command`, printing the server's answer.
pub async fn run(command: ScheduleCommand) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Put {
            name,
            queue,
            cron,
            time_zone,
            every,
            payload: text,
            misfire,
            overlap,
            max_attempts,
            expires_in,
            server,
        } => {
            let payload = payload(&text)?;
            let schedule = match (cron, every) {
                (Some(cron), _) => NewSchedule::cron(&queue, &cron, Some(&time_zone), payload),
                (None, Some(every)) => NewSchedule::every(&queue, millis(every), payload),
                (None, None) => unreachable!("clap requires --cron or --every"),
            };
            // The policies go as given: the server says which names it takes.
            let schedule = NewSchedule {
                misfire: Some(misfire),
                overlap: Some(overlap),
                max_attempts,
                expires_after_ms: expires_in.map(millis),
                ..schedule
            };
            let client = connect(&server);
            print(&client.put_schedule(&name, &schedule).await.explain(&client)?.value)
        }
        ScheduleCommand::List { server } => {
            let client = connect(&server);
            print(&client.schedules(&SchedulesQuery::default()).await.explain(&client)?)
        }
        ScheduleCommand::Show { name, server } => {
            let client = connect(&server);
            print(&client.schedule(&name).await.explain(&client)?)
        }
        ScheduleCommand::Pause { name, server } => {
            let client = connect(&server);
            print(&client.pause_schedule(&name).await.explain(&client)?)
        }
        ScheduleCommand::Resume { name, server } => {
            let client = connect(&server);
            print(&client.resume_schedule(&name).await.explain(&client)?)
        }
        ScheduleCommand::Delete { name, server } => {
            let client = connect(&server);
            client.delete_schedule(&name).await.explain(&client)?;
            println!("deleted schedule {name}");
            Ok(())
        }
    }
}
