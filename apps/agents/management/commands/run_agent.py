import asyncio

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.agents.batch import agent_question_answer
from apps.core.errors import ServiceError


class Command(BaseCommand):
    help = "Ask one agent of a project one question (batch mode) and print the answer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question")
        parser.add_argument("--project", required=True, help="slug or id of the project")
        parser.add_argument("--agent", required=True, help="name of the agent definition")

    def handle(self, *args: object, question: str, project: str, agent: str, **options: object) -> None:
        try:
            result = asyncio.run(
                agent_question_answer(project_ref=project, agent_name=agent, question=question)
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        if result.status != "success":
            raise CommandError(f"{result.error_code}: {result.error} (run {result.run_id})")
        self.stdout.write(result.text)
        self.stderr.write(
            f"model {result.model}, {result.steps} steps, {len(result.tool_calls)} tool calls, run {result.run_id}"
        )
