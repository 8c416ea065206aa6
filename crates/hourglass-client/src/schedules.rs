//! Schedules: put, look up, list, pause, resume and delete.

use hourglass_wire::{NewSchedule, Schedule, SchedulePage, SchedulesQuery};
use reqwest::Method;

use crate::client::{Client, Stored};
use crate::error::Error;
use crate::path::segment;

impl Client {
    /// `PUT /v1/schedules/{name}`: makes the schedule, or replaces it (then
    /// not [`created`](Stored::created)).
    pub async fn put_schedule(&self, name: &str, schedule: &NewSchedule) -> Result<Stored<Schedule>, Error> {
        self.post(Method::PUT, &format!("/v1/schedules/{}", segment(name)), schedule).await
    }

    /// `GET /v1/schedules/{name}`.
    pub async fn schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.get_json(Method::GET, &format!("/v1/schedules/{}", segment(name))).await
    }

    /// `GET /v1/schedules`: a page of the schedules, by name. Pass the page's
    /// `next` as the next query's `after`.
    pub async fn schedules(&self, query: &SchedulesQuery) -> Result<SchedulePage, Error> {
        self.query("/v1/schedules", query).await
    }

    /// `POST /v1/schedules/{name}/pause`: nothing is enqueued until it is resumed.
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.get_json(Method::POST, &format!("/v1/schedules/{}/pause", segment(name))).await
    }

    /// `POST /v1/schedules/{name}/resume`.
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.get_json(Method::POST, &format!("/v1/schedules/{}/resume", segment(name))).await
    }

    /// `DELETE /v1/schedules/{name}`.
    pub async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        self.no_content(Method::DELETE, &format!("/v1/schedules/{}", segment(name))).await
    }
}
